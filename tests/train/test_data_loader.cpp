// DataLoader: sequential batches as llm.c serves them, seeded random windows as nanoGPT draws
// them, exact resume from a saved state, and clear errors for unusable data.
#include "llmcc/train/data_loader.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "llmcc/error.h"
#include "llmcc/io/loss_mask_file.h"
#include "temp_dir.h"
#include "test_support.h"

namespace llmcc {
namespace {

namespace fs = std::filesystem;

struct TempDir : test::TempDir {
  // A shard holding first, first + 1, ..., first + n - 1: every token names its own position.
  std::string shard(const std::string& name, int first, int n) const {
    std::vector<std::int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = first + i;
    const std::string p = (path / name).string();
    write_token_file(p, t);
    return p;
  }
};

std::vector<std::int32_t> row(const Tokens& t, int b) {
  return std::vector<std::int32_t>(t.data() + b * t.T(), t.data() + (b + 1) * t.T());
}

TEST(DataLoader, SequentialAdvancesByBTAndWrapsToTheNextShard) {
  TempDir dir;
  // B*T = 6: shard a (20 tokens) gives batches at 0, 6, 12 (12 + 7 > 20 leaves a tail of 2);
  // shard b (13 tokens) gives 0, 6; then shard a again.
  const std::vector<std::string> shards = {dir.shard("a.bin", 0, 20), dir.shard("b.bin", 1000, 13)};
  DataLoader dl(shards, {.B = 2, .T = 3});
  EXPECT_EQ(dl.batches_per_epoch(), 5);
  EXPECT_EQ(dl.num_tokens(), 33);
  const std::vector<int> starts = {0, 6, 12, 1000, 1006, 0, 6};
  for (int s : starts) {
    SCOPED_TRACE("batch starting at " + std::to_string(s));
    dl.next_batch();
    EXPECT_EQ(row(dl.inputs(), 0), (std::vector<std::int32_t>{s, s + 1, s + 2}));  // (B, T) rows
    EXPECT_EQ(row(dl.inputs(), 1), (std::vector<std::int32_t>{s + 3, s + 4, s + 5}));
    EXPECT_EQ(row(dl.targets(), 1), (std::vector<std::int32_t>{s + 4, s + 5, s + 6}));
  }
  dl.reset();
  std::vector<std::int32_t> in(6), tg(6);  // caller-owned (B, T) buffers
  dl.next_batch(in.data(), tg.data());
  EXPECT_EQ(in, (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(tg, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
}

TEST(DataLoader, RandomWindowsAreSeededContiguousAndCoverEveryShard) {
  TempDir dir;
  const std::vector<std::string> shards = {dir.shard("a.bin", 0, 10), dir.shard("b.bin", 1000, 6)};
  const int T = 4;
  DataLoader a(shards, {.B = 3, .T = T, .mode = SampleMode::Random, .seed = 5});
  DataLoader b(shards, {.B = 3, .T = T, .mode = SampleMode::Random, .seed = 5});
  DataLoader c(shards, {.B = 3, .T = T, .mode = SampleMode::Random, .seed = 6});
  std::set<std::int32_t> starts;
  bool differs = false;
  for (int i = 0; i < 200; ++i) {
    a.next_batch();
    b.next_batch();
    c.next_batch();
    for (int r = 0; r < 3; ++r) {
      const auto in = row(a.inputs(), r), tg = row(a.targets(), r);
      ASSERT_EQ(in, row(b.inputs(), r));
      differs |= in != row(c.inputs(), r);
      for (int t = 0; t < T; ++t) {
        ASSERT_EQ(in[t], in[0] + t);  // one window of one shard
        ASSERT_EQ(tg[t], in[t] + 1);
      }
      starts.insert(in[0]);
    }
  }
  EXPECT_TRUE(differs);
  // Shard a offers starts 0..5 (size 10 - T), shard b 1000..1001: all are drawn, nothing else.
  EXPECT_EQ(starts, (std::set<std::int32_t>{0, 1, 2, 3, 4, 5, 1000, 1001}));
}

TEST(DataLoader, SavedStateResumesExactly) {
  TempDir dir;
  const std::vector<std::string> shards = {dir.shard("a.bin", 0, 50), dir.shard("b.bin", 500, 30)};
  for (SampleMode mode : {SampleMode::Sequential, SampleMode::Random}) {
    SCOPED_TRACE(mode == SampleMode::Sequential ? "sequential" : "random");
    const DataLoaderConfig cfg{.B = 2, .T = 4, .mode = mode, .seed = 9};
    DataLoader first(shards, cfg);
    for (int i = 0; i < 7; ++i) first.next_batch();
    const std::string saved = first.state().to_string();
    std::vector<std::int32_t> expected;
    for (int i = 0; i < 9; ++i) {
      first.next_batch();
      expected.insert(expected.end(), first.inputs().data(), first.inputs().data() + 8);
    }
    DataLoader resumed(shards, cfg);
    resumed.set_state(DataLoaderState::parse(saved));
    EXPECT_EQ(resumed.state().batches, 7);
    std::vector<std::int32_t> got;
    for (int i = 0; i < 9; ++i) {
      resumed.next_batch();
      got.insert(got.end(), resumed.inputs().data(), resumed.inputs().data() + 8);
    }
    EXPECT_EQ(got, expected);
    EXPECT_EQ(resumed.state(), first.state());
  }
}

TEST(DataLoader, RanksTogetherReadTheGlobalBatchOfOneLoader) {
  // N ranks with batch B read, row for row, what one loader with batch N*B reads, in both modes,
  // across shard changes, and their state is that loader's.
  TempDir dir;
  const std::vector<std::string> shards = {dir.shard("a.bin", 0, 1000), dir.shard("b.bin", 5000, 700)};
  const int T = 7;
  for (const SampleMode mode : {SampleMode::Sequential, SampleMode::Random}) {
    for (const int ranks : {2, 3}) {
      SCOPED_TRACE(std::string(mode == SampleMode::Sequential ? "sequential" : "random") + ", ranks " +
                   std::to_string(ranks));
      const int B = 2;
      DataLoader one(shards, {.B = B * ranks, .T = T, .mode = mode, .seed = 9});
      std::vector<DataLoader> parts;
      for (int r = 0; r < ranks; ++r)
        parts.emplace_back(shards,
                           DataLoaderConfig{.B = B, .T = T, .mode = mode, .seed = 9, .rank = r, .ranks = ranks});
      for (int batch = 0; batch < 40; ++batch) {
        one.next_batch();
        for (int r = 0; r < ranks; ++r) {
          parts[r].next_batch();
          for (int b = 0; b < B; ++b) {
            ASSERT_EQ(row(parts[r].inputs(), b), row(one.inputs(), r * B + b)) << "batch " << batch << " rank " << r;
            ASSERT_EQ(row(parts[r].targets(), b), row(one.targets(), r * B + b)) << "batch " << batch << " rank " << r;
          }
          EXPECT_EQ(parts[r].state(), one.state());
        }
      }
      EXPECT_EQ(parts[0].batches_per_epoch(), one.batches_per_epoch());
    }
  }
  EXPECT_THROW(DataLoader(shards, {.B = 1, .T = T, .rank = 2, .ranks = 2}), Error);
  // A shard must hold the global batch's window.
  EXPECT_THROW(DataLoader(shards, {.B = 50, .T = T, .ranks = 2}), Error);
}

TEST(DataLoader, ClearErrorsForUnusableDataAndStates) {
  TempDir dir;
  const std::string tiny = dir.shard("tiny.bin", 0, 8);
  EXPECT_TRUE(test::throws_error([&] { DataLoader d({tiny}, {.B = 2, .T = 4}); },
                                 {"[data_loader]", "tiny.bin", "too short", "8 tokens", "needs 9"}));
  EXPECT_TRUE(test::throws_error([&] { DataLoader d({tiny}, {.B = 2, .T = 8, .mode = SampleMode::Random}); },
                                 {"tiny.bin", "too short", "T + 1", "needs 9"}));
  DataLoader random_ok({tiny}, {.B = 64, .T = 7, .mode = SampleMode::Random});  // T + 1 = 8 fits
  random_ok.next_batch();
  EXPECT_TRUE(test::throws_error([&] { DataLoader d({}, {.B = 1, .T = 1}); }, {"no token files"}));
  EXPECT_TRUE(test::throws_error([&] { DataLoader d({tiny}, {.B = 0, .T = 1}); }, {"B=0"}));
  // A batch no machine holds is named, not a std::bad_alloc.
  EXPECT_TRUE(test::throws_error([&] { DataLoader d({tiny}, {.B = 2000000000, .T = 1024}); },
                                 {"B x T = 2000000000 x 1024 tokens needs", "MiB for the batch buffers"}));
  EXPECT_TRUE(test::throws_error([&] { DataLoader d({dir.path.string() + "/missing.bin"}, {}); },
                                 {"[token_file]", "missing.bin", "cannot open"}));

  // Tokens outside the model's vocabulary name the file and the position, when the loader is
  // made: before any batch, and in a part of the shard no batch would read (its tail).
  const std::string ids = dir.shard("ids.bin", 95, 10);  // 95 .. 104
  EXPECT_TRUE(test::throws_error([&] { DataLoader d({ids}, {.B = 1, .T = 3, .vocab_size = 100}); },
                                 {"ids.bin", "token 5 is 100", "[0, 100)"}));
  const std::string tail = dir.shard("tail.bin", 90, 10);  // 90 .. 99; Sequential B 2 x T 4 reads 0 .. 8
  EXPECT_TRUE(test::throws_error([&] { DataLoader d({tail}, {.B = 2, .T = 4, .vocab_size = 99}); },
                                 {"tail.bin", "token 9 is 99", "[0, 99)"}));
  DataLoader fine({ids}, {.B = 1, .T = 3, .vocab_size = 105});
  fine.next_batch();

  DataLoader dl({tiny}, {.B = 1, .T = 3});
  EXPECT_TRUE(test::throws_error([&] { dl.set_state({.shard = 1}); }, {"shard 1", "1 shards"}));
  EXPECT_TRUE(test::throws_error([&] { dl.set_state({.position = 5}); }, {"position 5", "tiny.bin"}));
  EXPECT_TRUE(test::throws_error([] { DataLoaderState::parse("shard=1 position=x rng=0 batches=0"); },
                                 {"position", "bad value 'x'"}));
  EXPECT_TRUE(test::throws_error([] { DataLoaderState::parse("shard=1 rng=0 batches=0"); }, {"lacks field position"}));
}

// Loss masks beside the shards (llmcc/io/loss_mask_file.h): every target whose token's mask is 0
// becomes -1 in both modes, the inputs stay; a data set where only some shards have masks is
// refused naming the one without.
TEST(DataLoader, LossMasksHideUntrainedTargets) {
  TempDir dir;
  const std::vector<std::string> shards = {dir.shard("a.bin", 0, 20), dir.shard("b.bin", 1000, 13)};
  // Token i of a is trained when i % 3 == 0; of b, when i >= 5.
  std::vector<std::uint8_t> ma(20), mb(13);
  for (int i = 0; i < 20; ++i) ma[i] = i % 3 == 0;
  for (int i = 0; i < 13; ++i) mb[i] = i >= 5;
  write_loss_mask_file(loss_mask_path(shards[0]), ma);
  write_loss_mask_file(loss_mask_path(shards[1]), mb);
  const auto trained = [](std::int32_t token) { return token < 1000 ? token % 3 == 0 : token - 1000 >= 5; };
  for (const SampleMode mode : {SampleMode::Sequential, SampleMode::Random}) {
    SCOPED_TRACE(mode == SampleMode::Sequential ? "sequential" : "random");
    DataLoader dl(shards, {.B = 2, .T = 3, .mode = mode, .seed = 9});
    EXPECT_TRUE(dl.masked());
    EXPECT_EQ(dl.trained_tokens(), 7 + 8);
    int hidden = 0, kept = 0;
    for (int step = 0; step < 12; ++step) {
      dl.next_batch();
      for (int i = 0; i < 6; ++i) {
        const std::int32_t in = dl.inputs().data()[i], target = dl.targets().data()[i];
        const std::int32_t next = in + 1;  // every token names its position
        EXPECT_EQ(target, trained(next) ? next : -1) << "input " << in;
        (target < 0 ? hidden : kept) += 1;
      }
    }
    EXPECT_GT(hidden, 0);
    EXPECT_GT(kept, 0);
  }
  // A shard without a mask among shards with one.
  const std::string c = dir.shard("c.bin", 2000, 10);
  try {
    DataLoader dl({shards[0], c}, {.B = 1, .T = 3});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.bin has no loss mask"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llmcc
