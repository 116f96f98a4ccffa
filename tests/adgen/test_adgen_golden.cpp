// Golden tests: adgen's output for small single-construct inputs (tests/adgen/golden/*.h) equals
// the committed <name>.grad.h.golden / .grad.cpp.golden byte for byte, and two runs produce
// identical bytes. After an intended change to the output, regenerate with
//   ADGEN_UPDATE_GOLDENS=1 ./test_adgen_golden
// and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "adgen_run.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> golden_inputs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(std::string(ADGEN_TEST_DIR) + "/golden"))
    if (e.path().extension() == ".h" && e.path().string().find(".grad.") == std::string::npos)
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// First differing line, for a readable failure.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ea = !std::getline(sa, la), eb = !std::getline(sb, lb);
    if (ea && eb) return "identical";
    if (ea != eb || la != lb)
      return "line " + std::to_string(line) + ":\n  got:      " + (ea ? "<eof>" : la) + "\n  expected: " + (eb ? "<eof>" : lb);
  }
}

class AdgenGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(AdgenGolden, OutputMatchesGoldenAndIsDeterministic) {
  const fs::path input = GetParam();
  const std::string stem = input.stem().string();
  const std::string dir = ::testing::TempDir() + "/adgen_golden_" + stem;
  fs::create_directories(dir + "/a");
  fs::create_directories(dir + "/b");
  std::string out[2][2];
  for (int run = 0; run < 2; ++run) {
    const std::string d = dir + (run == 0 ? "/a/" : "/b/");
    const adgen_test::RunResult r = adgen_test::run_adgen(input.string(), d + stem + ".grad.h", d + stem + ".grad.cpp");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    out[run][0] = adgen_test::read_file(d + stem + ".grad.h");
    out[run][1] = adgen_test::read_file(d + stem + ".grad.cpp");
  }
  EXPECT_EQ(out[0][0], out[1][0]) << "header differs between two runs";
  EXPECT_EQ(out[0][1], out[1][1]) << "source differs between two runs";
  const std::string golden_h = input.parent_path().string() + "/" + stem + ".grad.h.golden";
  const std::string golden_cpp = input.parent_path().string() + "/" + stem + ".grad.cpp.golden";
  if (std::getenv("ADGEN_UPDATE_GOLDENS") != nullptr) {
    std::ofstream(golden_h, std::ios::binary) << out[0][0];
    std::ofstream(golden_cpp, std::ios::binary) << out[0][1];
    GTEST_SKIP() << "golden files rewritten";
  }
  ASSERT_TRUE(fs::exists(golden_h)) << golden_h << " missing (ADGEN_UPDATE_GOLDENS=1 writes it)";
  EXPECT_TRUE(out[0][0] == adgen_test::read_file(golden_h)) << first_difference(out[0][0], adgen_test::read_file(golden_h));
  EXPECT_TRUE(out[0][1] == adgen_test::read_file(golden_cpp))
      << first_difference(out[0][1], adgen_test::read_file(golden_cpp));
}

INSTANTIATE_TEST_SUITE_P(Inputs, AdgenGolden, ::testing::ValuesIn(golden_inputs()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return fs::path(i.param).stem().string();
                         });

// docs/adgen.md shows generated code from the layernorm_block golden: every C++ block after
// "Generated (" must appear verbatim in the golden files, so the docs cannot drift.
TEST(AdgenDocs, ExamplesAreVerbatimGoldenOutput) {
  const std::string doc = adgen_test::read_file(std::string(LLMCC_SOURCE_DIR) + "/docs/adgen.md");
  const std::string golden = adgen_test::read_file(std::string(ADGEN_TEST_DIR) + "/golden/layernorm_block.grad.h.golden") +
                             adgen_test::read_file(std::string(ADGEN_TEST_DIR) + "/golden/layernorm_block.grad.cpp.golden");
  std::size_t pos = doc.find("Generated (");
  ASSERT_NE(pos, std::string::npos);
  const std::size_t end = doc.find("## Compared with Clad", pos);
  int blocks = 0;
  while ((pos = doc.find("```cpp\n", pos)) != std::string::npos && pos < end) {
    pos += 7;
    const std::size_t close = doc.find("```", pos);
    // Each top-level definition in the block (separated by blank lines) is checked on its own.
    std::string block = doc.substr(pos, close - pos);
    for (std::size_t start = 0; start < block.size();) {
      std::size_t stop = block.find("\n\n", start);
      if (stop == std::string::npos) stop = block.size();
      const std::string piece = block.substr(start, stop - start);
      EXPECT_NE(golden.find(piece), std::string::npos) << "docs/adgen.md shows code adgen no longer writes:\n" << piece;
      start = stop + 2;
    }
    ++blocks;
    pos = close + 3;
  }
  EXPECT_GE(blocks, 4);
}

// Every model family the build runs adgen over (src/models/CMakeLists.txt: the LLMCC_MODEL_FAMILIES
// list; family F's model is src/models/F/F.h) has its committed generated/F.grad.{h,cpp}, so the
// freshness check below covers each model and a build without Clang gets every gradient.
TEST(AdgenGenerated, EveryModelSourceHasCommittedFiles) {
  const std::string cmake = adgen_test::read_file(std::string(LLMCC_SOURCE_DIR) + "/src/models/CMakeLists.txt");
  const auto list = cmake.find("set(LLMCC_MODEL_FAMILIES ");
  ASSERT_NE(list, std::string::npos) << "src/models/CMakeLists.txt has no set(LLMCC_MODEL_FAMILIES ...)";
  const std::size_t begin = list + std::string("set(LLMCC_MODEL_FAMILIES ").size();
  std::istringstream words(cmake.substr(begin, cmake.find(')', list) - begin));
  std::vector<std::string> stems;
  for (std::string w; words >> w;) stems.push_back(w);
  for (const std::string& stem : stems) {
    const fs::path dir = fs::path(LLMCC_SOURCE_DIR) / "generated";
    const std::string source = "src/models/" + stem + "/" + stem + ".h";
    EXPECT_TRUE(fs::exists(fs::path(LLMCC_SOURCE_DIR) / source)) << source << " does not exist";
    EXPECT_TRUE(fs::exists(dir / (stem + ".grad.cpp")) && fs::exists(dir / (stem + ".grad.h")))
        << source << " has no committed generated/" << stem
        << ".grad.{h,cpp}: run tools/adgen/update_generated.sh <adgen> " << source;
  }
  EXPECT_GE(stems.size(), 2u) << "expected gpt2 and llama in src/models/CMakeLists.txt";
}

// generated/ holds adgen's output for the shipped models (for builds without Clang): each file
// names its source in its first line; regenerating it must give the same bytes.
TEST(AdgenGenerated, CommittedFilesAreFresh) {
  const fs::path dir = fs::path(LLMCC_SOURCE_DIR) / "generated";
  int checked = 0;
  if (fs::exists(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.size() < 9 || name.substr(name.size() - 9) != ".grad.cpp") continue;
      const std::string stem = name.substr(0, name.size() - 9);
      const std::string text = adgen_test::read_file(e.path().string());
      const auto from = text.find(" from "), dot = text.find(". Do not edit");
      ASSERT_TRUE(from != std::string::npos && dot != std::string::npos) << name << ": no source in its banner";
      const std::string source = std::string(LLMCC_SOURCE_DIR) + "/" + text.substr(from + 6, dot - from - 6);
      // Same file names as the committed ones: the .cpp includes its header by name.
      const fs::path out_dir = fs::path(::testing::TempDir()) / "adgen_fresh";
      fs::create_directories(out_dir);
      const std::string out = (out_dir / stem).string();
      const adgen_test::RunResult r = adgen_test::run_adgen(source, out + ".grad.h", out + ".grad.cpp");
      ASSERT_EQ(r.exit_code, 0) << r.output;
      EXPECT_TRUE(adgen_test::read_file(out + ".grad.cpp") == text)
          << "generated/" << name << " is stale: " << first_difference(adgen_test::read_file(out + ".grad.cpp"), text);
      EXPECT_TRUE(adgen_test::read_file(out + ".grad.h") == adgen_test::read_file((dir / (stem + ".grad.h")).string()))
          << "generated/" << stem << ".grad.h is stale";
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no generated/*.grad.cpp yet";
}

}  // namespace
