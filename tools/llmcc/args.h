// ArgParser: the flags of one `llmcc <command>`, with typed values, defaults shown in --help,
// and errors that name the flag and what was expected.
//
//   ArgParser p("train", "Train a GPT-2 on token shards.");
//   p.add("--steps", &steps, "optimizer steps to run");
//   p.add("--lr", &lr, "peak learning rate");
//   if (!p.parse(argc, argv)) return 0;   // --help was printed
//
// Flags take their value as the next argument or after '=' (--lr 3e-4, --lr=3e-4); a bool flag
// takes no value (--flag sets true, --no-flag false). A list flag takes one or more values up to
// the next argument starting with "--". An unknown flag, a missing or malformed value throws
// llmcc::Error ("[llmcc train] --steps expects an integer, got 'ten'").
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace llmcc::cli {

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary);

  void add(const std::string& flag, std::string* value, const std::string& help);
  void add(const std::string& flag, int* value, const std::string& help);
  void add(const std::string& flag, std::int64_t* value, const std::string& help);
  void add(const std::string& flag, std::uint64_t* value, const std::string& help);
  void add(const std::string& flag, float* value, const std::string& help);
  void add(const std::string& flag, double* value, const std::string& help);
  void add(const std::string& flag, bool* value, const std::string& help);
  void add(const std::string& flag, std::vector<std::string>* values, const std::string& help);
  // A flag must be given (shown as "required" in --help).
  void require(const std::string& flag);
  // A heading printed before the flags added after it ("Model", "Optimizer", ...).
  void section(const std::string& title);
  // Free text after the flag list (examples).
  void epilogue(const std::string& text);

  // argv[0] is the first flag (the command name already removed). Returns false when --help or
  // -h was given (help printed to stdout); throws llmcc::Error on bad input.
  bool parse(int argc, char** argv);
  bool parse(const std::vector<std::string>& args);
  bool given(const std::string& flag) const { return given_.count(flag) != 0; }
  std::string help() const;

 private:
  struct Flag {
    std::string name;
    std::string kind;  // "string", "int", ..., shown in help
    std::string help;
    std::string default_text;
    bool takes_value = true;
    bool is_list = false;
    std::function<void(const std::string&)> set;  // parses and stores one value
    std::function<void()> set_true, set_false;    // bool flags
    std::function<void()> clear;                  // list flags, before the first value
  };
  Flag& add_flag(const std::string& flag, const std::string& kind, const std::string& help);
  [[noreturn]] void error(const std::string& message) const;
  const Flag* find(const std::string& name) const;

  std::string command_, summary_, epilogue_;
  std::vector<Flag> flags_;
  std::vector<std::pair<std::size_t, std::string>> sections_;  // (first flag index, title)
  std::set<std::string> required_, given_;
};

}  // namespace llmcc::cli
