// A family's configuration as a checkpoint stores it (its `config` section: model.* keys, see
// docs/data-format.md), read key by key. Every error is llmcc::Error("[<family>] <where>: ...")
// naming the key and what it holds.
#pragma once

#include <string>

#include "llmcc/io/checkpoint.h"

namespace llmcc::models {

class ConfigKeys {
 public:
  // kv: the parsed section; where: the file, for messages. Refuses a section written for another
  // family (model.family; files without it are GPT-2's).
  ConfigKeys(const KeyValues& kv, std::string family, std::string where);

  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  const std::string& text(const std::string& key) const;  // present
  int positive_int(const std::string& key) const;         // 1 .. 2^30
  float positive_float(const std::string& key) const;     // finite, > 0
  bool boolean(const std::string& key) const;             // true or false

 private:
  [[noreturn]] void fail(const std::string& what) const;
  const KeyValues& kv_;
  std::string family_, where_;
};

}  // namespace llmcc::models
