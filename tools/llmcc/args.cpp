#include "args.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <sstream>

#include "llmcc/error.h"

namespace llmcc::cli {

namespace {

template <class T>
std::string show(const T& v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

bool parse_int64(const std::string& text, std::int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return false;
  *out = v;
  return true;
}

bool parse_double(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

}  // namespace

ArgParser::ArgParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void ArgParser::error(const std::string& message) const {
  fail("llmcc " + command_, message + " (see llmcc " + command_ + " --help)");
}

ArgParser::Flag& ArgParser::add_flag(const std::string& flag, const std::string& kind, const std::string& help) {
  LLMCC_ASSERT(flag.size() > 2 && flag.rfind("--", 0) == 0, "flags are spelled --name");
  LLMCC_ASSERT(find(flag) == nullptr, "flag added twice");
  Flag f;
  f.name = flag;
  f.kind = kind;
  f.help = help;
  flags_.push_back(std::move(f));
  return flags_.back();
}

void ArgParser::add(const std::string& flag, std::string* value, const std::string& help) {
  Flag& f = add_flag(flag, "text", help);
  f.default_text = value->empty() ? "" : "\"" + *value + "\"";
  f.set = [value](const std::string& v) { *value = v; };
}

void ArgParser::add(const std::string& flag, int* value, const std::string& help) {
  Flag& f = add_flag(flag, "int", help);
  f.default_text = show(*value);
  f.set = [this, flag, value](const std::string& v) {
    std::int64_t x = 0;
    if (!parse_int64(v, &x) || x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
      error(flag + " expects an integer, got '" + v + "'");
    *value = static_cast<int>(x);
  };
}

void ArgParser::add(const std::string& flag, std::int64_t* value, const std::string& help) {
  Flag& f = add_flag(flag, "int", help);
  f.default_text = show(*value);
  f.set = [this, flag, value](const std::string& v) {
    if (!parse_int64(v, value)) error(flag + " expects an integer, got '" + v + "'");
  };
}

void ArgParser::add(const std::string& flag, std::uint64_t* value, const std::string& help) {
  Flag& f = add_flag(flag, "uint", help);
  f.default_text = show(*value);
  f.set = [this, flag, value](const std::string& v) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || v[0] == '-' || errno != 0 || end != v.c_str() + v.size())
      error(flag + " expects a non-negative integer, got '" + v + "'");
    *value = x;
  };
}

void ArgParser::add(const std::string& flag, float* value, const std::string& help) {
  Flag& f = add_flag(flag, "number", help);
  f.default_text = show(*value);
  f.set = [this, flag, value](const std::string& v) {
    double x = 0;
    if (!parse_double(v, &x)) error(flag + " expects a number, got '" + v + "'");
    *value = static_cast<float>(x);
  };
}

void ArgParser::add(const std::string& flag, double* value, const std::string& help) {
  Flag& f = add_flag(flag, "number", help);
  f.default_text = show(*value);
  f.set = [this, flag, value](const std::string& v) {
    if (!parse_double(v, value)) error(flag + " expects a number, got '" + v + "'");
  };
}

void ArgParser::add(const std::string& flag, bool* value, const std::string& help) {
  Flag& f = add_flag(flag, "", help);
  f.default_text = *value ? "on" : "off";
  f.takes_value = false;
  f.set_true = [value] { *value = true; };
  f.set_false = [value] { *value = false; };
}

void ArgParser::add(const std::string& flag, std::vector<std::string>* values, const std::string& help) {
  Flag& f = add_flag(flag, "text...", help);
  f.is_list = true;
  f.set = [values](const std::string& v) { values->push_back(v); };
  f.clear = [values] { values->clear(); };
}

void ArgParser::require(const std::string& flag) {
  LLMCC_ASSERT(find(flag) != nullptr, "require() of a flag never added");
  required_.insert(flag);
}

void ArgParser::section(const std::string& title) { sections_.emplace_back(flags_.size(), title); }

void ArgParser::epilogue(const std::string& text) { epilogue_ = text; }

const ArgParser::Flag* ArgParser::find(const std::string& name) const {
  for (const Flag& f : flags_)
    if (f.name == name) return &f;
  return nullptr;
}

bool ArgParser::parse(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) args.emplace_back(argv[i]);
  return parse(args);
}

bool ArgParser::parse(const std::vector<std::string>& args) {
  given_.clear();
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) error("unexpected argument '" + arg + "' (flags start with --)");
    std::string name = arg, inline_value;
    bool has_inline = false;
    if (const auto eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
      has_inline = true;
    }
    const Flag* f = find(name);
    bool negated = false;
    if (f == nullptr && name.rfind("--no-", 0) == 0) {
      const Flag* positive = find("--" + name.substr(5));
      if (positive != nullptr && !positive->takes_value) {
        f = positive;
        negated = true;
      }
    }
    if (f == nullptr) error("unknown flag " + name);
    if (given_.count(f->name) != 0 && !f->is_list) error(f->name + " given twice");
    given_.insert(f->name);
    if (!f->takes_value) {
      if (has_inline) error(name + " takes no value (got '" + inline_value + "')");
      negated ? f->set_false() : f->set_true();
      continue;
    }
    if (f->is_list) {
      if (f->clear) f->clear();
      std::size_t count = 0;
      if (has_inline) {
        f->set(inline_value);
        ++count;
      }
      while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
        f->set(args[++i]);
        ++count;
      }
      if (count == 0) error(name + " expects at least one value");
      continue;
    }
    if (has_inline) {
      f->set(inline_value);
    } else {
      if (i + 1 >= args.size()) error(name + " expects a value (" + f->kind + ")");
      f->set(args[++i]);
    }
  }
  for (const std::string& r : required_)
    if (given_.count(r) == 0) error(r + " is required");
  return true;
}

std::string ArgParser::help() const {
  std::ostringstream s;
  s << "usage: llmcc " << command_ << " [flags]\n\n" << summary_ << "\n";
  std::size_t next_section = 0;
  if (sections_.empty() || sections_[0].first != 0) s << "\nFlags:\n";
  for (std::size_t i = 0; i < flags_.size(); ++i) {
    while (next_section < sections_.size() && sections_[next_section].first == i)
      s << "\n" << sections_[next_section++].second << ":\n";
    const Flag& f = flags_[i];
    std::string head = "  " + f.name + (f.kind.empty() ? "" : " <" + f.kind + ">");
    s << std::left << std::setw(30) << head;
    if (head.size() >= 30) s << "\n" << std::string(30, ' ');
    s << f.help;
    if (required_.count(f.name) != 0)
      s << " (required)";
    else if (!f.default_text.empty())
      s << " [default: " << f.default_text << "]";
    s << "\n";
  }
  s << "  " << std::left << std::setw(28) << "--help" << "show this help\n";
  if (!epilogue_.empty()) s << "\n" << epilogue_ << "\n";
  return s.str();
}

}  // namespace llmcc::cli
