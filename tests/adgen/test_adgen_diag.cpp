// Diagnostics: every input in tests/adgen/diag/ holds one construct outside the subset and a
// comment `// expect-error: <line>:<col>: <message fragment>`. adgen must exit with code 1
// (not crash), write no output, and print `<file>:<line>:<col>: error: <fragment>...`.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "adgen_run.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> diag_inputs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(std::string(ADGEN_TEST_DIR) + "/diag"))
    if (e.path().extension() == ".h" && e.path().filename() != "common.h") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

class AdgenDiag : public ::testing::TestWithParam<std::string> {};

TEST_P(AdgenDiag, ReportsTheConstructAtItsLocation) {
  const std::string input = GetParam();
  const std::string text = adgen_test::read_file(input);
  // "expect-error: <line>:<column>: <fragment of the message>"
  const std::string marker = "expect-error: ";
  const std::size_t at = text.find(marker);
  ASSERT_NE(at, std::string::npos) << input << " has no expect-error comment";
  const std::size_t end = std::min(text.find('\n', at), text.size());
  const std::string spec = text.substr(at + marker.size(), end - at - marker.size());
  const std::size_t colon1 = spec.find(':'), colon2 = spec.find(':', colon1 + 1);
  ASSERT_TRUE(colon1 != std::string::npos && colon2 != std::string::npos && spec.compare(colon2, 2, ": ") == 0)
      << input << ": expect-error is not `<line>:<column>: <fragment>`";
  const std::string where = fs::path(input).filename().string() + ":" + spec.substr(0, colon2) + ": error: ";
  const std::string fragment = spec.substr(colon2 + 2);
  const std::string out_dir = ::testing::TempDir();
  const std::string out_h = out_dir + "/diag.grad.h", out_cpp = out_dir + "/diag.grad.cpp";
  fs::remove(out_h);
  fs::remove(out_cpp);
  const adgen_test::RunResult r = adgen_test::run_adgen(input, out_h, out_cpp);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(where), std::string::npos) << "expected `" << where << "` in:\n" << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << "expected `" << fragment << "` in:\n" << r.output;
  EXPECT_FALSE(fs::exists(out_h)) << "no output is written on error";
}

INSTANTIATE_TEST_SUITE_P(Inputs, AdgenDiag, ::testing::ValuesIn(diag_inputs()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return fs::path(i.param).stem().string();
                         });

TEST(AdgenCli, UsageErrorsExitWithCode2) {
  const std::string cmd = std::string(ADGEN_EXE) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[512];
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(out.find("usage: adgen"), std::string::npos) << out;
}

}  // namespace
