// Runs the adgen binary (path and include directories come from CMake) and captures its exit
// code and combined output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace adgen_test {

struct RunResult {
  int exit_code = -1;
  std::string output;
};

inline RunResult run_adgen(const std::string& input, const std::string& out_header, const std::string& out_source) {
  const std::string cmd = std::string(ADGEN_EXE) + " " + input + " --out-header " + out_header + " --out-source " +
                          out_source + " --root " + LLMCC_SOURCE_DIR + " -- -I" + LLMCC_SOURCE_DIR + "/include -I" +
                          LLMCC_SOURCE_DIR + "/src -I" + ADGEN_TEST_DIR + " -I" + LLMCC_SOURCE_DIR +
                          "/tests/train 2>&1";  // = update_generated.sh
  RunResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace adgen_test
