// DataLoader: B x T batches of input tokens and their next-token targets from token files
// (llm.c's format, see token_file.h).
//
// Every row of a batch is a window of T + 1 consecutive tokens w of one shard:
//   inputs(b, t) = w[t],  targets(b, t) = w[t + 1]                        // (B, T) each
// Two ways to choose the windows:
//   Sequential (llm.c): the batch is the B*T + 1 tokens from the current position of the
//     current shard, rows one after another; the position then advances by B*T. When fewer than
//     B*T + 1 tokens remain, the loader moves to position 0 of the next shard (after the last
//     shard, the first again). The tail of a shard that does not fill a batch is skipped.
//     A validation loader is a Sequential loader that reset() puts back at the start.
//   Random (nanoGPT's get_batch): each row independently starts at a position drawn uniformly
//     from all windows of all shards (shard i offers size_i - T start positions), with an Rng
//     seeded from `seed`, so the same seed gives the same batches.
// Data-parallel ranks (ranks > 1) share one stream of global batches of ranks*B rows: rank r
// reads rows [r*B, (r+1)*B) of each, so N ranks with batch B together see exactly the tokens
// one loader sees with batch N*B (Sequential: rank r's rows start r*B*T tokens into the global
// window; Random: every rank draws all N*B starts and keeps its own). The state is the global
// stream's, the same on every rank and independent of N for a given N*B.
// Every shard must hold at least ranks*B*T + 1 tokens in Sequential mode and T + 1 in Random mode;
// otherwise the constructor throws llmcc::Error naming the shard. With vocab_size > 0 the
// constructor checks every token of every shard, and each batch is checked again as it is read:
// a token outside [0, vocab_size) is an error naming file and position.
//
// Loss masks (io/loss_mask_file.h): a shard with a mask file beside it (X.bin, X.mask) gives the
// target -1, which the loss ignores, wherever the mask of the target token is 0:
//   targets(b, t) = mask[w + t + 1] ? w[t + 1] : -1      (w: the window's first token)
// Either every shard has a mask or none; otherwise the constructor throws naming the shard.
// Masks of padded chat data (rows of R tokens, one conversation each: loss_mask_file.h) make
// every window start at a multiple of R, and T must be R: Sequential batches are consecutive
// rows, Random rows are drawn from the shards' rows. The shards must agree on R.
//
// Batches go to loader-owned buffers (inputs(), targets()) or caller-owned ones; nothing is
// allocated per batch. state()/set_state() save and restore the position exactly, so a resumed
// run sees the same batches as an uninterrupted one.
//
//   DataLoader train({"data/train_000.bin"}, {.B = 4, .T = 64, .mode = SampleMode::Random, .seed = 1});
//   train.next_batch();
//   loss = model.loss(train.inputs(), train.targets());
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "llmcc/tensor.h"
#include "llmcc/train/rng.h"
#include "llmcc/io/token_file.h"

namespace llmcc {

enum class SampleMode { Sequential, Random };

struct DataLoaderConfig {
  int B = 1;
  int T = 1;
  SampleMode mode = SampleMode::Sequential;
  std::uint64_t seed = 0;  // Random mode only
  int vocab_size = 0;      // > 0: check every token against it, up front and in every batch
  int rank = 0;            // this rank's share of the global batch of ranks*B rows (see above)
  int ranks = 1;
};

// Where the loader is; restoring it reproduces the following batches exactly.
struct DataLoaderState {
  std::uint64_t shard = 0;    // Sequential: current shard
  std::int64_t position = 0;  // Sequential: start of the next batch in that shard
  std::uint64_t rng = 0;      // Random: the Rng's state
  std::int64_t batches = 0;   // batches served so far (both modes; for logs)

  // "shard=3 position=4096 rng=123 batches=17" and back; parse throws llmcc::Error naming the
  // bad field.
  std::string to_string() const;
  static DataLoaderState parse(const std::string& text);
  bool operator==(const DataLoaderState&) const = default;
};

class DataLoader {
 public:
  DataLoader(const std::vector<std::string>& shard_paths, const DataLoaderConfig& config);

  // Next batch into the loader's buffers.
  void next_batch();
  Tokens inputs() const { return Tokens(inputs_.data(), config_.B, config_.T); }    // (B, T)
  Tokens targets() const { return Tokens(targets_.data(), config_.B, config_.T); }  // (B, T)

  // Next batch into caller buffers of B*T int32 each (row-major (B, T)).
  void next_batch(std::int32_t* inputs, std::int32_t* targets);

  // Back to the first batch: shard 0, position 0, the Rng re-seeded, batch count 0.
  void reset();

  DataLoaderState state() const;
  // Throws llmcc::Error when the state does not fit these shards (shard index or position out
  // of range), e.g. a checkpoint from another data set.
  void set_state(const DataLoaderState& state);

  const DataLoaderConfig& config() const { return config_; }
  std::size_t num_shards() const { return shards_.size(); }
  std::int64_t num_tokens() const { return total_tokens_; }
  // Whether the shards have loss masks, and how many tokens they train on (num_tokens without).
  bool masked() const { return !masks_.empty(); }
  // R when the shards hold one conversation per row of R tokens, else 0.
  std::int32_t row_tokens() const { return row_tokens_; }
  std::int64_t trained_tokens() const { return trained_tokens_; }
  // Sequential: global batches in one pass over all shards (the tails that do not fill one skipped).
  std::int64_t batches_per_epoch() const;

 private:
  void read_window(std::size_t shard, std::int64_t start, std::int64_t n, std::int32_t* out) const;
  void check_vocab(const std::int32_t* window, std::int64_t n, std::size_t shard, std::int64_t start) const;
  // targets[0, n) of the window starting at `start` of `shard`: -1 where the shard's mask is 0.
  void apply_mask(std::size_t shard, std::int64_t start, std::int64_t n, std::int32_t* targets) const;

  DataLoaderConfig config_;
  std::vector<TokenFile> shards_;
  std::vector<std::vector<std::uint8_t>> masks_;  // per shard, one byte per token; empty: no masks
  std::int64_t trained_tokens_ = 0;
  std::int32_t row_tokens_ = 0;
  std::vector<std::int64_t> window_starts_;  // Random: prefix sums of start positions per shard
  std::int64_t total_tokens_ = 0;
  std::vector<std::int32_t> inputs_, targets_;  // (B, T) each
  std::vector<std::int32_t> window_;            // (B*T + 1) staging for one batch or row
  std::size_t shard_ = 0;
  std::int64_t position_ = 0;
  Rng rng_;
  std::int64_t batches_ = 0;
};

}  // namespace llmcc
