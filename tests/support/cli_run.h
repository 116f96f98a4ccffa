// Runs the built llmcc binary (LLMCC_BINARY) as a user would, capturing its exit code, stdout and
// stderr, for command-line tests.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace llmcc::test {

struct CliResult {
  int code = -1;
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// `llmcc <args>` with stdout and stderr captured in files of `dir`, no standard input.
inline CliResult run_llmcc(const TempDir& dir, const std::vector<std::string>& args) {
  std::string cmd = shell_quote(LLMCC_BINARY);
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  const std::string out = dir.file("cli.out"), err = dir.file("cli.err");
  cmd += " >" + shell_quote(out) + " 2>" + shell_quote(err) + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// `llmcc <args>` run by /bin/sh after `prefix` (e.g. "ulimit -f 8; trap '' XFSZ", a full disk),
// captured like run_llmcc.
inline CliResult run_llmcc_after(const TempDir& dir, const std::string& prefix, const std::vector<std::string>& args) {
  std::string cmd = prefix + "; exec " + shell_quote(LLMCC_BINARY);
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  const std::string out = dir.file("cli.out"), err = dir.file("cli.err");
  const std::string line =
      "sh -c " + shell_quote(cmd) + " >" + shell_quote(out) + " 2>" + shell_quote(err) + " </dev/null";
  const int status = std::system(line.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace llmcc::test
