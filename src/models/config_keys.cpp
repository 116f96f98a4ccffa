#include "models/config_keys.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "llmcc/error.h"

namespace llmcc::models {

ConfigKeys::ConfigKeys(const KeyValues& kv, std::string family, std::string where)
    : kv_(kv), family_(std::move(family)), where_(std::move(where)) {
  const auto it = kv_.find("model.family");
  const std::string stored = it == kv_.end() ? "gpt2" : it->second;
  if (stored != family_) fail("holds a '" + stored + "' model, not " + family_);
}

void ConfigKeys::fail(const std::string& what) const { llmcc::fail(family_, where_ + ": " + what); }

const std::string& ConfigKeys::text(const std::string& key) const {
  const auto it = kv_.find(key);
  if (it == kv_.end()) fail("configuration has no " + key);
  return it->second;
}

int ConfigKeys::positive_int(const std::string& key) const {
  const std::string& s = text(key);
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || *end != '\0' || v <= 0 || v > (1L << 30))
    fail(key + " = '" + s + "' is not a positive integer");
  return static_cast<int>(v);
}

float ConfigKeys::positive_float(const std::string& key) const {
  const std::string& s = text(key);
  char* end = nullptr;
  errno = 0;
  const float v = std::strtof(s.c_str(), &end);
  if (s.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || v <= 0.0f)
    fail(key + " = '" + s + "' is not a positive number");
  return v;
}

bool ConfigKeys::boolean(const std::string& key) const {
  const std::string& s = text(key);
  if (s != "true" && s != "false") fail(key + " = '" + s + "' is not true or false");
  return s == "true";
}

}  // namespace llmcc::models
