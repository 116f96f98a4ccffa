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

// `command` run by /bin/sh with stdout and stderr captured in files of `dir`, no standard input.
inline CliResult run_captured(const TempDir& dir, const std::string& command) {
  const std::string out = dir.file("cli.out"), err = dir.file("cli.err");
  const std::string line = command + " >" + shell_quote(out) + " 2>" + shell_quote(err) + " </dev/null";
  const int status = std::system(line.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

inline std::string llmcc_command(const std::vector<std::string>& args) {
  std::string cmd = shell_quote(LLMCC_BINARY);
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  return cmd;
}

// `llmcc <args>`, captured as above.
inline CliResult run_llmcc(const TempDir& dir, const std::vector<std::string>& args) {
  return run_captured(dir, llmcc_command(args));
}

// `llmcc <args>` run by /bin/sh after `prefix` (e.g. "ulimit -f 8; trap '' XFSZ", a full disk),
// captured like run_llmcc.
inline CliResult run_llmcc_after(const TempDir& dir, const std::string& prefix, const std::vector<std::string>& args) {
  return run_captured(dir, "sh -c " + shell_quote(prefix + "; exec " + llmcc_command(args)));
}

// `<launcher> llmcc <args>` (e.g. "mpirun -np 2"), captured like run_llmcc.
inline CliResult run_llmcc_under(const TempDir& dir, const std::string& launcher,
                                 const std::vector<std::string>& args) {
  return run_captured(dir, launcher + " " + llmcc_command(args));
}

}  // namespace llmcc::test
