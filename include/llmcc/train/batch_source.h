// Where a Trainer's batches come from.
//
// A batch is the tuple of an adgen entry's inputs after the model (`<entry>_Entry::Inputs`):
// `std::tuple<Tokens, Tokens>` for gpt2_loss(m, idx, targets), `std::tuple<Tensor, Tensor>` for a
// model that maps a tensor to a tensor. A source hands out one batch at a time and can say where
// it is (state) and go back there (set_state), so a resumed run sees the batches an uninterrupted
// one would have; a validation source is reset() before every evaluation.
//
//   TokenBatches train(files, {.B = 8, .T = 64, .mode = SampleMode::Random, .seed = 1});
//   GeneratedBatches<std::tuple<Tensor, Tensor>> toy(seed, [&](auto& batch, Rng& rng) { ... });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "llmcc/tensor.h"
#include "llmcc/train/data_loader.h"
#include "llmcc/train/rng.h"

namespace llmcc {

template <class Batch>
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next batch; valid until the next call (it may live in the source's buffers).
  virtual const Batch& next() = 0;
  // Where the source is, and back there: after set_state(state()) the same batches follow.
  virtual DataLoaderState state() const = 0;
  virtual void set_state(const DataLoaderState& state) = 0;
  // Back to the first batch (a validation source is reset before every evaluation).
  virtual void reset() = 0;
  // Batches in one pass over the data; 0 when the data has no end (generated batches).
  virtual std::int64_t batches_per_epoch() const { return 0; }
  // Items (tokens, examples) in one batch, for the throughput the progress line shows.
  virtual double items_per_batch() const { return 0.0; }
};

using TokenPair = std::tuple<Tokens, Tokens>;  // (inputs, targets), both (B, T)

// Next-token batches from token files (DataLoader, data_loader.h): (inputs, targets).
class TokenBatches final : public BatchSource<TokenPair> {
 public:
  TokenBatches(const std::vector<std::string>& shard_paths, const DataLoaderConfig& config)
      : loader_(shard_paths, config), items_(static_cast<double>(config.B) * config.T) {}

  const TokenPair& next() override {
    loader_.next_batch();
    batch_ = TokenPair(loader_.inputs(), loader_.targets());
    return batch_;
  }
  DataLoaderState state() const override { return loader_.state(); }
  void set_state(const DataLoaderState& state) override { loader_.set_state(state); }
  void reset() override { loader_.reset(); }
  std::int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }
  double items_per_batch() const override { return items_; }
  DataLoader& loader() { return loader_; }

 private:
  DataLoader loader_;
  TokenPair batch_;
  double items_;
};

// Batches a function makes, drawing any randomness from the source's Rng: synthetic tasks,
// windows of an in-memory corpus, trajectories of a simulator. The state is the Rng's and the
// batch count, so a resumed run continues exactly. `make` fills the source-owned batch in place
// (allocate its tensors once, outside any step arena, and overwrite them).
template <class Batch>
class GeneratedBatches final : public BatchSource<Batch> {
 public:
  using Make = std::function<void(Batch& batch, Rng& rng)>;
  GeneratedBatches(std::uint64_t seed, Make make, double items_per_batch = 0.0)
      : seed_(seed), rng_(seed), make_(std::move(make)), items_(items_per_batch) {}

  const Batch& next() override {
    make_(batch_, rng_);
    ++batches_;
    return batch_;
  }
  DataLoaderState state() const override {
    DataLoaderState s;
    s.rng = rng_.state();
    s.batches = batches_;
    return s;
  }
  void set_state(const DataLoaderState& s) override {
    rng_.set_state(s.rng);
    batches_ = s.batches;
  }
  void reset() override {
    rng_ = Rng(seed_);
    batches_ = 0;
  }
  double items_per_batch() const override { return items_; }
  Batch& batch() { return batch_; }

 private:
  std::uint64_t seed_;
  Rng rng_;
  Make make_;
  double items_;
  Batch batch_{};
  std::int64_t batches_ = 0;
};

}  // namespace llmcc
