// Loss mask files (llmcc/io/loss_mask_file.h): the path beside a token file, a round trip, and
// every malformed file refused by name (magic, version, a count other than the token file's, the
// size, a byte other than 0 or 1), as is writing a value other than 0 or 1.
#include "llmcc/io/loss_mask_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "llmcc/error.h"
#include "cli_run.h"
#include "temp_dir.h"
#include "test_support.h"

namespace llmcc {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LossMaskFile, LivesBesideItsTokenFileAndRoundTrips) {
  EXPECT_EQ(loss_mask_path("data/train_000000.bin"), "data/train_000000.mask");
  EXPECT_EQ(loss_mask_path("tokens"), "tokens.mask");
  test::TempDir dir;
  const std::string path = dir.file("a.mask");
  const std::vector<std::uint8_t> mask = {0, 1, 1, 0, 0, 1, 0};
  write_loss_mask_file(path, mask);
  EXPECT_EQ(read_loss_mask_file(path, 7), mask);
  write_loss_mask_file(dir.file("empty.mask"), {});
  EXPECT_TRUE(read_loss_mask_file(dir.file("empty.mask"), 0).empty());
  // Packed (row 0) and in rows of 3 (two rows and one more token).
  std::int32_t row = -1;
  (void)read_loss_mask_file(path, 7, &row);
  EXPECT_EQ(row, 0);
  write_loss_mask_file(path, mask, 3);
  EXPECT_EQ(read_loss_mask_file(path, 7, &row), mask);
  EXPECT_EQ(row, 3);
}

TEST(LossMaskFile, MalformedFilesAreRefusedByName) {
  test::TempDir dir;
  const std::string path = dir.file("a.mask");
  write_loss_mask_file(path, std::vector<std::uint8_t>{1, 0, 1});
  EXPECT_NE(error_of([&] { (void)read_loss_mask_file(path, 4); }).find("masks 3 tokens, but its token file holds 4"),
            std::string::npos);
  EXPECT_NE(error_of([&] { write_loss_mask_file(path, std::vector<std::uint8_t>{0, 2}); }).find("value 1 is 2"),
            std::string::npos);
  std::string bytes = test::slurp(path);
  const auto rewrite = [&](std::string b) {
    std::ofstream(path, std::ios::binary) << b;
    return error_of([&] { (void)read_loss_mask_file(path, 3); });
  };
  std::string bad = bytes;
  bad[0] = 'x';
  EXPECT_NE(rewrite(bad).find("bad magic"), std::string::npos);
  bad = bytes;
  bad[4] = 2;
  EXPECT_NE(rewrite(bad).find("unknown version 2"), std::string::npos);
  bad = bytes;
  bad.back() = 7;
  EXPECT_NE(rewrite(bad).find("value 2 is 7, not 0 or 1"), std::string::npos);
  EXPECT_NE(rewrite(bytes + "x").find("expected the header and 3 mask bytes"), std::string::npos);
  EXPECT_NE(rewrite(bytes.substr(0, 100)).find("truncated"), std::string::npos);
  bad = bytes;
  bad[12] = 2;  // rows of 2: 3 tokens are one row and one more
  EXPECT_EQ(rewrite(bad), "(no error)");
  bad[12] = 4;
  EXPECT_NE(rewrite(bad).find("rows of 4 tokens, but 3 tokens are not whole rows and one more"), std::string::npos);
  EXPECT_NE(error_of([&] {
              write_loss_mask_file(path, std::vector<std::uint8_t>{0, 1, 0, 0}, 2);
            }).find("4 tokens are not rows of 2 and one more"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)read_loss_mask_file(dir.file("none.mask"), 3); }).find("none.mask"),
            std::string::npos);
}

}  // namespace
}  // namespace llmcc
