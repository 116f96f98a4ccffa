// Checkpoints: bit-identical round trip of the whole training state, clear errors (never a
// crash) for truncated or corrupt files and for another model's layout, keep-last-K by write
// order (a resumed branch is kept), and an interrupted write that leaves the previous checkpoint
// intact.
#include "llmcc/io/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "test_support.h"
#include "io/crc32.h"

namespace llmcc {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

std::vector<ParameterInfo> layout(int C) {
  return {{"wte.weight", Shape{50, C}},                 // (V, C)
          {"h.0.ln_1.bias", Shape{C}},                  // (C)
          {"h.0.attn.c_attn.weight", Shape{3 * C, C}},  // (3C, C)
          {"lm_head.extra", Shape{2, 3, 5}}};           // a 3-D one for good measure
}

void fill(ParameterStore& s, std::uint64_t seed) {
  for (std::size_t i = 0; i < s.count(); ++i) {
    const auto v = test::random_vector<float>(s.shape(i).numel(), seed + i);
    std::copy(v.begin(), v.end(), s.data() + s.offset(i));
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool same_bits(const ParameterStore& a, const ParameterStore& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A trained-looking state: random weights, a few AdamW steps, loader and RNG positions.
struct TrainingRun {
  ParameterStore params;
  AdamW opt;
  TrainState state;
  explicit TrainingRun(int C, std::uint64_t seed) : params(layout(C)), opt(params) {
    fill(params, seed);
    ParameterStore grads = params.like();
    fill(grads, seed + 100);
    opt.step(params, grads, 0.01f);
    opt.step(params, grads, 0.01f);
    state.step = 2;
    state.data = {.shard = 1, .position = 4096, .rng = 0xDEADBEEFCAFEF00Dull, .batches = 2};
    state.rngs = {{"sample", 12345678901234567ull}, {"init", 0}};
    state.config = {{"model", "gpt2-tiny"}, {"lr", "0.0006"}, {"note", "spaces = fine"}};
  }
};

TEST(Checkpoint, Crc32IsTheStandardOne) {
  EXPECT_EQ(detail::crc32("123456789", 9), 0xCBF43926u);
  detail::Crc32 split;  // streaming in odd pieces gives the same value
  split.update("1234", 4);
  split.update("56789", 5);
  EXPECT_EQ(split.value(), 0xCBF43926u);
}

TEST(Checkpoint, RoundTripIsBitIdentical) {
  TempDir dir;
  TrainingRun a(8, 1);
  const std::string p = dir.file("ckpt.bin");
  save_checkpoint(p, a.params, &a.opt, a.state);
  EXPECT_FALSE(fs::exists(p + ".tmp"));

  TrainingRun b(8, 999);  // different contents, same layout
  ASSERT_FALSE(same_bits(a.params, b.params));
  const TrainState loaded = load_checkpoint(p, b.params, &b.opt);
  EXPECT_TRUE(same_bits(a.params, b.params));
  EXPECT_TRUE(same_bits(a.opt.m(), b.opt.m()));
  EXPECT_TRUE(same_bits(a.opt.v(), b.opt.v()));
  EXPECT_EQ(b.opt.t(), 2);
  EXPECT_EQ(loaded, a.state);

  const CheckpointReader r(p);
  EXPECT_EQ(r.sections(), (std::vector<std::string>{"params", "adamw.m", "adamw.v", "state", "config"}));
  const auto infos = r.tensors("params");
  ASSERT_EQ(infos.size(), 4u);
  EXPECT_EQ(infos[2].name, "h.0.attn.c_attn.weight");
  EXPECT_EQ(infos[2].shape, (Shape{24, 8}));

  // Weights only: loads into a model, but cannot resume training.
  const std::string w = dir.file("weights.bin");
  save_checkpoint(w, a.params, nullptr, a.state);
  TrainingRun c(8, 5);
  load_checkpoint(w, c.params, nullptr);
  EXPECT_TRUE(same_bits(a.params, c.params));
  EXPECT_TRUE(test::throws_error([&] { load_checkpoint(w, c.params, &c.opt); },
                                 {"[checkpoint]", "weights.bin", "weights only"}));
}

TEST(Checkpoint, AnotherLayoutNamesTheTensorAndChangesNothing) {
  TempDir dir;
  TrainingRun a(8, 1);
  const std::string p = dir.file("ckpt.bin");
  save_checkpoint(p, a.params, &a.opt, a.state);
  TrainingRun small(4, 2);
  const ParameterStore before = [&] {
    ParameterStore s = small.params.like();
    std::memcpy(s.data(), small.params.data(), s.size() * sizeof(float));
    return s;
  }();
  EXPECT_TRUE(test::throws_error(
      [&] { load_checkpoint(p, small.params, &small.opt); },
      {"[checkpoint]", "ckpt.bin: wte.weight has shape (50, 8) in the checkpoint, (50, 4) in the model"}));
  EXPECT_TRUE(same_bits(before, small.params));

  ParameterStore missing(
      {{"wte.weight", Shape{50, 8}}, {"h.0.ln_1.bias", Shape{8}}, {"h.0.attn.c_attn.weight", Shape{24, 8}}});
  EXPECT_TRUE(test::throws_error([&] { CheckpointReader(p).read_tensors("params", missing); },
                                 {"lm_head.extra in the checkpoint's 'params' has no counterpart"}));
  std::vector<ParameterInfo> more = layout(8);
  more.push_back({"h.1.ln_1.bias", Shape{8}});
  ParameterStore bigger(more);
  EXPECT_TRUE(test::throws_error([&] { CheckpointReader(p).read_tensors("params", bigger); },
                                 {"h.1.ln_1.bias of the model is not in the checkpoint"}));
  // A tensor stored under another name: both names in the message.
  std::vector<ParameterInfo> renamed = layout(8);
  renamed[2].name = "h.0.attn.qkv.weight";
  ParameterStore renamed_store(renamed);
  EXPECT_TRUE(test::throws_error([&] { CheckpointReader(p).read_tensors("params", renamed_store); },
                                 {"h.0.attn.qkv.weight of the model is not in the checkpoint",
                                  "it has h.0.attn.c_attn.weight, which the model has not"}));
  EXPECT_TRUE(test::throws_error([&] { CheckpointReader(p).blob("nope"); }, {"no section 'nope'", "params, adamw.m"}));
}

// The bytes of run's checkpoint, saved at path.
std::vector<char> saved_bytes(const TrainingRun& run, const std::string& path) {
  save_checkpoint(path, run.params, &run.opt, run.state);
  std::vector<char> bytes(fs::file_size(path));
  std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

TEST(Checkpoint, TruncatedOrCorruptFilesAreErrorsNeverCrashes) {
  TempDir dir;
  TrainingRun a(8, 1);
  std::vector<char> bytes = saved_bytes(a, dir.file("good.bin"));
  const std::string bad = dir.file("bad.bin");
  const auto write_bad = [&](std::size_t n) {
    std::ofstream(bad, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(n));
  };
  int checked = 0;
  for (std::size_t n = 0; n < bytes.size(); n += (n < 256 ? 1 : 97)) {
    write_bad(n);
    TrainingRun b(8, 3);
    ASSERT_TRUE(test::throws_error([&] { load_checkpoint(bad, b.params, &b.opt); }, {"[checkpoint]", "bad.bin"}))
        << "truncated to " << n << " of " << bytes.size() << " bytes";
    ++checked;
  }
  EXPECT_GT(checked, 300);
  write_bad(bytes.size() - 1);
  EXPECT_TRUE(test::throws_error([&] { CheckpointReader r(bad); }, {"bad.bin", "truncated"}));

  // A flipped bit anywhere is caught by the checksum (or an earlier structural check).
  for (std::size_t at = 0; at < bytes.size(); at += 131) {
    bytes[at] ^= 0x10;
    write_bad(bytes.size());
    ASSERT_TRUE(test::throws_error([&] { CheckpointReader r(bad); }, {"[checkpoint]", "bad.bin"}))
        << "bit flipped at " << at;
    bytes[at] ^= 0x10;
  }
  bytes[bytes.size() / 2] ^= 1;
  write_bad(bytes.size());
  EXPECT_TRUE(test::throws_error([&] { CheckpointReader r(bad); }, {"bad.bin", "checksum mismatch"}));
  EXPECT_TRUE(test::throws_error([&] { CheckpointReader r(dir.file("none.bin")); },
                                 {"[checkpoint]", "none.bin", "cannot open"}));
}

// Where the parts of a checkpoint lie, read back from its bytes (the layout checkpoint.cpp
// writes): each section's table entry, and for the tensor section each descriptor's data offset.
struct Layout {
  struct Section {
    std::uint32_t kind = 0;
    std::string name;
    std::size_t entry_offset_at = 0;  // where the section's offset field is
    std::uint64_t offset = 0, size = 0;
  };
  std::vector<Section> sections;
  std::vector<std::size_t> data_offset_at;  // where each tensor's data-offset field is
  std::vector<std::uint64_t> data_offset;

  explicit Layout(const std::vector<char>& b) {
    const auto u32 = [&](std::size_t at) {
      std::uint32_t v;
      std::memcpy(&v, &b[at], 4);
      return v;
    };
    const auto u64 = [&](std::size_t at) {
      std::uint64_t v;
      std::memcpy(&v, &b[at], 8);
      return v;
    };
    const std::uint32_t count = u32(12);
    std::size_t pos = 32;
    for (std::uint32_t k = 0; k < count; ++k) {
      Section s;
      s.kind = u32(pos);
      const std::uint32_t len = u32(pos + 4);
      s.name.assign(&b[pos + 8], len);
      pos += 8 + len;
      s.entry_offset_at = pos;
      s.offset = u64(pos);
      s.size = u64(pos + 8);
      pos += 16;
      sections.push_back(s);
    }
    for (const Section& s : sections) {
      if (s.kind != 1) continue;
      std::size_t at = s.offset;
      const std::uint32_t n = u32(at);
      at += 4;
      for (std::uint32_t i = 0; i < n; ++i) {
        at += 4 + u32(at);  // name
        const std::uint32_t ndim = u32(at);
        at += 8 + 8 * std::size_t{ndim};  // ndim, dtype, dims
        data_offset_at.push_back(at);
        data_offset.push_back(u64(at));
        at += 8;
      }
    }
  }
};

void put_u64_at(std::vector<char>& b, std::size_t at, std::uint64_t v) { std::memcpy(&b[at], &v, 8); }

// Re-seals edited bytes with a valid checksum, so only the structural checks can refuse them.
void reseal(std::vector<char>& b) {
  const std::uint32_t crc = detail::crc32(b.data(), b.size() - 8);
  std::memcpy(&b[b.size() - 8], &crc, 4);
}

TEST(Checkpoint, OverlappingPartsAreRefusedEvenWithAValidChecksum) {
  TempDir dir;
  TrainingRun a(8, 1);
  std::vector<char> bytes = saved_bytes(a, dir.file("good.bin"));
  const Layout layout(bytes);
  ASSERT_GE(layout.data_offset.size(), 4u);
  const std::string bad = dir.file("bad.bin");
  const auto refused = [&](std::vector<char> edited, std::initializer_list<const char*> words) {
    reseal(edited);
    std::ofstream(bad, std::ios::binary | std::ios::trunc)
        .write(edited.data(), static_cast<std::streamsize>(edited.size()));
    TrainingRun b(8, 3);
    return test::throws_error([&] { load_checkpoint(bad, b.params, &b.opt); }, words);
  };
  // Resealed but unchanged: loads.
  EXPECT_FALSE(refused(bytes, {"[checkpoint]"}));

  // The second tensor's data moved onto the first's.
  std::vector<char> e = bytes;
  put_u64_at(e, layout.data_offset_at[1], layout.data_offset[0]);
  EXPECT_TRUE(refused(e, {"bad.bin", "corrupt", "overlaps", "the data of tensor"}));

  // The first tensor's data moved into the descriptors that follow its own.
  e = bytes;
  put_u64_at(e, layout.data_offset_at[0], layout.data_offset_at[1]);
  EXPECT_TRUE(refused(e, {"bad.bin", "corrupt", "overlaps", "the tensor descriptors"}));

  // A blob section laid over the tensor section.
  const auto tensors = std::find_if(layout.sections.begin(), layout.sections.end(),
                                    [](const Layout::Section& s) { return s.kind == 1; });
  const auto blob = std::find_if(layout.sections.begin(), layout.sections.end(),
                                 [](const Layout::Section& s) { return s.kind == 2 && s.size > 0; });
  ASSERT_TRUE(tensors != layout.sections.end() && blob != layout.sections.end());
  e = bytes;
  put_u64_at(e, blob->entry_offset_at, tensors->offset + 64);
  const std::string blob_section = "section '" + blob->name + "'";
  EXPECT_TRUE(refused(e, {"bad.bin", "corrupt", "overlaps", blob_section.c_str()}));

  // A section over the header and section table.
  e = bytes;
  put_u64_at(e, blob->entry_offset_at, 0);
  EXPECT_TRUE(refused(e, {"bad.bin", "corrupt", "overlaps", "the header and section table"}));
}

TEST(Checkpoint, KeepsTheLastKAndSurvivesAnInterruptedWrite) {
  TempDir dir;
  const std::string run = dir.file("run");
  EXPECT_FALSE(latest_checkpoint(run).has_value());
  TrainingRun a(4, 1);
  for (std::int64_t step : {100, 200, 300, 400, 1000000}) {
    a.state.step = step;
    save_checkpoint_in_dir(run, 3, a.params, &a.opt, a.state);
  }
  const auto all = list_checkpoints(run);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].first, 300);
  EXPECT_EQ(fs::path(all[0].second).filename(), "ckpt_000300.bin");
  EXPECT_EQ(fs::path(all[2].second).filename(), "ckpt_1000000.bin");
  EXPECT_EQ(*latest_checkpoint(run), checkpoint_path(run, 1000000));

  // A crash while writing step 1000100 leaves only a partial .tmp: the last good checkpoint
  // is untouched and still the latest; the next save replaces and cleans up the leftover.
  const std::string partial = checkpoint_path(run, 1000100) + ".tmp";
  {
    std::vector<char> head(100, 'x');
    std::ofstream(partial, std::ios::binary).write(head.data(), 100);
  }
  EXPECT_EQ(*latest_checkpoint(run), checkpoint_path(run, 1000000));
  TrainingRun b(4, 2);
  EXPECT_EQ(load_checkpoint(*latest_checkpoint(run), b.params, &b.opt).step, 1000000);
  EXPECT_TRUE(same_bits(a.params, b.params));
  a.state.step = 1000100;
  save_checkpoint_in_dir(run, 3, a.params, &a.opt, a.state);
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_EQ(list_checkpoints(run).size(), 3u);
  EXPECT_EQ(load_checkpoint(*latest_checkpoint(run), b.params, &b.opt).step, 1000100);
  EXPECT_TRUE(test::throws_error([&] { prune_checkpoints(run, 0); }, {"keep_last must be >= 1"}));
}

// A run resumed from an earlier checkpoint writes lower steps than the branch it abandoned: its
// files are the newest (by write order), kept by pruning and found by latest_checkpoint.
TEST(Checkpoint, AResumedBranchIsKeptAndIsTheLatest) {
  TempDir dir;
  const std::string run = dir.file("run");
  TrainingRun first(4, 1), branch(4, 2);  // different weights tell the branches apart
  const auto save = [&](TrainingRun& r, std::int64_t step, int keep_last) {
    r.state.step = step;
    return save_checkpoint_in_dir(run, keep_last, r.params, &r.opt, r.state);
  };
  const auto steps = [&] {
    std::vector<std::int64_t> out;
    for (const auto& [step, path] : list_checkpoints(run)) out.push_back(step);
    return out;
  };
  const auto weights_of = [&](const std::string& path) {
    TrainingRun into(4, 3);
    load_checkpoint(path, into.params, &into.opt);
    return std::move(into.params);
  };
  for (std::int64_t step : {4, 5, 6}) save(first, step, 3);
  EXPECT_EQ(read_text(run + "/checkpoints.txt"), "ckpt_000004.bin\nckpt_000005.bin\nckpt_000006.bin\n");

  // Resumed from 4, the branch writes 5 again: with keep_last 1 it is the one left.
  EXPECT_EQ(save(branch, 5, 1), checkpoint_path(run, 5));
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{5}));
  EXPECT_EQ(*latest_checkpoint(run), checkpoint_path(run, 5));
  EXPECT_TRUE(same_bits(weights_of(checkpoint_path(run, 5)), branch.params));
  EXPECT_EQ(read_text(run + "/checkpoints.txt"), "ckpt_000005.bin\n");

  // With room to keep more, the abandoned 6 stays until it falls outside keep_last.
  fs::remove_all(run);
  for (std::int64_t step : {4, 5, 6}) save(first, step, 3);
  save(branch, 5, 3);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{4, 6, 5}));  // oldest written first
  EXPECT_EQ(*latest_checkpoint(run), checkpoint_path(run, 5));
  save(branch, 6, 3);  // replaces the abandoned 6
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{4, 5, 6}));
  EXPECT_TRUE(same_bits(weights_of(checkpoint_path(run, 6)), branch.params));
  save(branch, 7, 2);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{6, 7}));

  // Checkpoints of an llmcc that kept no list (simulated by deleting it) are older than any
  // listed one, and ordered by step among themselves; a leftover list .tmp is cleaned up.
  fs::remove_all(run);
  for (std::int64_t step : {4, 5, 6}) save(first, step, 3);
  fs::remove(run + "/checkpoints.txt");
  std::ofstream(run + "/checkpoints.txt.tmp") << "ckpt_0000";
  EXPECT_EQ(*latest_checkpoint(run), checkpoint_path(run, 6));
  save(branch, 5, 2);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{6, 5}));
  EXPECT_EQ(*latest_checkpoint(run), checkpoint_path(run, 5));
  EXPECT_FALSE(fs::exists(run + "/checkpoints.txt.tmp"));
  // A list naming files that are gone (or garbage) is harmless.
  std::ofstream(run + "/checkpoints.txt", std::ios::app) << "ckpt_000009.bin\nnot a checkpoint\n";
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{6, 5}));
  save(branch, 8, 1);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{8}));
  EXPECT_EQ(read_text(run + "/checkpoints.txt"), "ckpt_000008.bin\n");
}

TEST(Checkpoint, KeyValuesRoundTripAndRejectWhatTheyCannotHold) {
  const KeyValues kv = {{"a", "1"}, {"b.c", "x=y z"}, {"empty", ""}};
  EXPECT_EQ(parse_key_values(format_key_values(kv), "test"), kv);
  EXPECT_TRUE(test::throws_error([] { format_key_values({{"a=b", "1"}}); }, {"key 'a=b'"}));
  EXPECT_TRUE(test::throws_error([] { format_key_values({{"a", "1\n2"}}); }, {"value of 'a'"}));
  EXPECT_TRUE(
      test::throws_error([] { parse_key_values("a=1\nnoequals\n", "f.bin"); }, {"f.bin: line 2 is not key=value"}));
}

// Unconfirmed checkpoints are marked in the list; pruning keeps the newest usable one however
// many unconfirmed ones follow it; --resume auto's choice skips them. Unmarked and unlisted
// checkpoints (an llmcc before the marks) are usable as before.
TEST(Checkpoint, TheNewestConfirmedCheckpointIsNeverPruned) {
  TempDir dir;
  const std::string run = dir.file("run");
  TrainingRun r(4, 1);
  const auto save = [&](std::int64_t step, bool confirmed) {
    r.state.step = step;
    return save_checkpoint_in_dir(run, 2, r.params, &r.opt, r.state, confirmed);
  };
  const auto steps = [&] {
    std::vector<std::int64_t> out;
    for (const auto& e : list_checkpoint_entries(run)) out.push_back(e.step);
    return out;
  };
  EXPECT_FALSE(latest_usable_checkpoint(run).has_value());
  save(1, true);
  save(2, true);
  save(3, false);
  save(4, false);
  save(5, false);
  // keep_last 2 keeps 4 and 5, and 2, the newest confirmed.
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{2, 4, 5}));
  EXPECT_EQ(read_text(run + "/checkpoints.txt"),
            "ckpt_000002.bin\nckpt_000004.bin unconfirmed\nckpt_000005.bin unconfirmed\n");
  EXPECT_EQ(*latest_checkpoint(run), checkpoint_path(run, 5));
  EXPECT_EQ(*latest_usable_checkpoint(run), checkpoint_path(run, 2));
  EXPECT_EQ(checkpoint_status(checkpoint_path(run, 2)), CheckpointStatus::confirmed);
  EXPECT_EQ(checkpoint_status(checkpoint_path(run, 5)), CheckpointStatus::unconfirmed);
  EXPECT_EQ(checkpoint_status(dir.file("elsewhere.bin")), CheckpointStatus::unlisted);
  const auto entries = list_checkpoint_entries(run);
  EXPECT_TRUE(usable(entries[0].status));
  EXPECT_FALSE(usable(entries[2].status));

  // A confirmed one lets the older confirmed one go; rewriting a step replaces its mark.
  save(6, true);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{5, 6}));
  save(6, false);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{5, 6}));
  EXPECT_FALSE(latest_usable_checkpoint(run).has_value());
  EXPECT_EQ(checkpoint_status(checkpoint_path(run, 6)), CheckpointStatus::unconfirmed);

  // Checkpoints no list names are usable, older than listed ones, by step.
  fs::remove_all(run);
  save(7, true);
  save(8, false);
  fs::remove(run + "/checkpoints.txt");
  EXPECT_EQ(*latest_usable_checkpoint(run), checkpoint_path(run, 8));
  EXPECT_EQ(checkpoint_status(checkpoint_path(run, 8)), CheckpointStatus::unlisted);
}

}  // namespace
}  // namespace llmcc
