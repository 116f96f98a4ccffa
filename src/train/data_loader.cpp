#include "llmcc/train/data_loader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "llmcc/error.h"
#include "llmcc/io/loss_mask_file.h"
#include "llmcc/runtime.h"

namespace llmcc {
namespace {
constexpr const char* kWhere = "data_loader";

std::string row_text(std::int32_t row) {
  return row > 0 ? "one conversation per row of " + std::to_string(row) + " tokens" : "packed conversations";
}
}  // namespace

std::string DataLoaderState::to_string() const {
  return "shard=" + std::to_string(shard) + " position=" + std::to_string(position) + " rng=" + std::to_string(rng) +
         " batches=" + std::to_string(batches);
}

DataLoaderState DataLoaderState::parse(const std::string& text) {
  DataLoaderState s;
  bool seen[4] = {false, false, false, false};
  std::istringstream in(text);
  std::string field;
  while (in >> field) {
    const std::size_t eq = field.find('=');
    if (eq == std::string::npos) fail(kWhere, "state field '" + field + "' is not key=value");
    const std::string key = field.substr(0, eq);
    const std::string value = field.substr(eq + 1);
    std::size_t used = 0;
    try {
      if (key == "shard") {
        s.shard = std::stoull(value, &used);
        seen[0] = true;
      } else if (key == "position") {
        s.position = std::stoll(value, &used);
        seen[1] = true;
      } else if (key == "rng") {
        s.rng = std::stoull(value, &used);
        seen[2] = true;
      } else if (key == "batches") {
        s.batches = std::stoll(value, &used);
        seen[3] = true;
      } else {
        fail(kWhere, "unknown state field '" + key + "' in \"" + text + "\"");
      }
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used != value.size() || value.empty() || value[0] == '-') {
      fail(kWhere, "state field " + key + " has bad value '" + value + "' in \"" + text + "\"");
    }
  }
  const char* names[4] = {"shard", "position", "rng", "batches"};
  for (int i = 0; i < 4; ++i) {
    if (!seen[i]) fail(kWhere, std::string("state lacks field ") + names[i] + ": \"" + text + "\"");
  }
  return s;
}

DataLoader::DataLoader(const std::vector<std::string>& shard_paths, const DataLoaderConfig& config)
    : config_(config), rng_(config.seed) {
  const int B = config.B, T = config.T;
  if (B < 1 || T < 1) {
    fail(kWhere, "B and T must be >= 1, got B=" + std::to_string(B) + " T=" + std::to_string(T));
  }
  if (shard_paths.empty()) fail(kWhere, "no token files given");
  if (config.ranks < 1 || config.rank < 0 || config.rank >= config.ranks)
    fail(kWhere, "rank " + std::to_string(config.rank) + " of " + std::to_string(config.ranks) +
                     " ranks: need 0 <= rank < ranks");
  const std::int64_t BT = static_cast<std::int64_t>(B) * T;
  const std::int64_t global_BT = BT * config.ranks;
  // The batch buffers (inputs, targets and the window they are cut from) are allocated here, so a
  // size the machine cannot hold is named here rather than ending in std::bad_alloc.
  if (const std::size_t available = available_memory_bytes(); available > 0) {
    const double bytes = 3.0 * static_cast<double>(BT) * sizeof(std::int32_t);
    if (bytes > static_cast<double>(available))
      fail(kWhere, "B x T = " + std::to_string(B) + " x " + std::to_string(T) + " tokens needs " +
                       std::to_string(static_cast<long long>(bytes / double(1 << 20))) +
                       " MiB for the batch buffers alone; " + std::to_string(static_cast<long long>(available >> 20)) +
                       " MiB of memory are available");
  }
  const std::int64_t need = config.mode == SampleMode::Sequential ? global_BT + 1 : T + 1;
  std::int64_t windows = 0;
  shards_.reserve(shard_paths.size());
  for (const std::string& path : shard_paths) {
    shards_.emplace_back(path);
    const std::int64_t n = shards_.back().size();
    if (n < need) {
      const std::string what =
          config.mode == SampleMode::Sequential
              ? "one B x T + 1 window (B=" + std::to_string(B) +
                    (config.ranks > 1 ? " x " + std::to_string(config.ranks) + " ranks" : std::string()) +
                    ", T=" + std::to_string(T) + ")"
              : "one T + 1 window (T=" + std::to_string(T) + ")";
      fail(kWhere, path + ": too short: " + std::to_string(n) + " tokens, but " + what + " needs " +
                       std::to_string(need) + "; use a smaller batch or sequence length, or more data");
    }
    total_tokens_ += n;
    window_starts_.push_back(windows);
    windows += n - T;
  }
  window_starts_.push_back(windows);
  // Loss masks: all shards or none.
  std::size_t with_mask = 0;
  for (const std::string& path : shard_paths) with_mask += std::filesystem::exists(loss_mask_path(path)) ? 1 : 0;
  if (with_mask != 0 && with_mask != shard_paths.size()) {
    for (const std::string& path : shard_paths)
      if (!std::filesystem::exists(loss_mask_path(path)))
        fail(kWhere, path + " has no loss mask (" + loss_mask_path(path) +
                         ") but other shards have one; give shards of "
                         "one data set (all with masks or none)");
  }
  trained_tokens_ = total_tokens_;
  if (with_mask != 0) {
    trained_tokens_ = 0;
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      std::int32_t row = 0;
      masks_.push_back(read_loss_mask_file(loss_mask_path(shard_paths[s]), shards_[s].size(), &row));
      for (const std::uint8_t m : masks_.back()) trained_tokens_ += m;
      if (s == 0) row_tokens_ = row;
      if (row != row_tokens_)
        fail(kWhere, shard_paths[s] + ": " + row_text(row) + ", but " + shard_paths[0] + " has " +
                         row_text(row_tokens_) + "; give shards of one data set");
    }
  }
  if (row_tokens_ > 0) {
    // One conversation per row from its first token: rows start at multiples of T only.
    if (T != row_tokens_)
      fail(kWhere, "the shards hold one conversation per row of " + std::to_string(row_tokens_) +
                       " tokens (prepare --chat --pad-to " + std::to_string(row_tokens_) +
                       "): the sequence length must be " + std::to_string(row_tokens_) + ", got " + std::to_string(T));
    windows = 0;
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      window_starts_[s] = windows;
      windows += (shards_[s].size() - 1) / T;
    }
    window_starts_.back() = windows;
  }
  // Every token of every shard against the vocabulary, before the first batch: a bad id fails
  // here, naming file and position, not after hours of training (or never, in an unread tail).
  if (config.vocab_size > 0) {
    constexpr std::int64_t kChunk = std::int64_t{1} << 16;
    std::vector<std::int32_t> chunk(static_cast<std::size_t>(kChunk));
    for (std::size_t s = 0; s < shards_.size(); ++s)
      for (std::int64_t start = 0; start < shards_[s].size(); start += kChunk) {
        const std::int64_t n = std::min(kChunk, shards_[s].size() - start);
        shards_[s].read(start, n, chunk.data());
        check_vocab(chunk.data(), n, s, start);
      }
  }
  inputs_.resize(static_cast<std::size_t>(BT));
  targets_.resize(static_cast<std::size_t>(BT));
  window_.resize(static_cast<std::size_t>(config.mode == SampleMode::Sequential ? BT + 1 : T + 1));
}

void DataLoader::read_window(std::size_t shard, std::int64_t start, std::int64_t n, std::int32_t* out) const {
  shards_[shard].read(start, n, out);
  if (config_.vocab_size > 0) check_vocab(out, n, shard, start);
}

void DataLoader::check_vocab(const std::int32_t* window, std::int64_t n, std::size_t shard, std::int64_t start) const {
  for (std::int64_t i = 0; i < n; ++i) {
    if (window[i] < 0 || window[i] >= config_.vocab_size) {
      fail(kWhere, shards_[shard].path() + ": token " + std::to_string(start + i) + " is " + std::to_string(window[i]) +
                       ", outside the model's vocabulary [0, " + std::to_string(config_.vocab_size) +
                       "); was the data tokenized for another model?");
    }
  }
}

void DataLoader::apply_mask(std::size_t shard, std::int64_t start, std::int64_t n, std::int32_t* targets) const {
  if (masks_.empty()) return;
  const std::uint8_t* m = masks_[shard].data() + start + 1;  // the mask of each target token
  for (std::int64_t i = 0; i < n; ++i)
    if (m[i] == 0) targets[i] = -1;
}

void DataLoader::next_batch() { next_batch(inputs_.data(), targets_.data()); }

void DataLoader::next_batch(std::int32_t* inputs, std::int32_t* targets) {
  const int B = config_.B, T = config_.T;
  const std::int64_t BT = static_cast<std::int64_t>(B) * T;
  const std::int64_t global_BT = BT * config_.ranks;
  std::int32_t* w = window_.data();
  if (config_.mode == SampleMode::Sequential) {
    read_window(shard_, position_ + BT * config_.rank, BT + 1, w);  // (B*T + 1)
    std::memcpy(inputs, w, static_cast<std::size_t>(BT) * sizeof(std::int32_t));
    std::memcpy(targets, w + 1, static_cast<std::size_t>(BT) * sizeof(std::int32_t));
    apply_mask(shard_, position_ + BT * config_.rank, BT, targets);
    position_ += global_BT;
    if (position_ + global_BT + 1 > shards_[shard_].size()) {
      shard_ = (shard_ + 1) % shards_.size();
      position_ = 0;
    }
  } else {
    const std::uint64_t windows = static_cast<std::uint64_t>(window_starts_.back());
    // Every rank draws the whole global batch's starts, so the Rng stays in step; row `global`
    // is this rank's row `global - first` when it falls in its share.
    const std::int64_t first = static_cast<std::int64_t>(config_.rank) * B;
    for (std::int64_t global = 0; global < static_cast<std::int64_t>(B) * config_.ranks; ++global) {
      const std::int64_t r = static_cast<std::int64_t>(rng_.below(windows));
      const std::int64_t b = global - first;
      if (b < 0 || b >= B) continue;
      // The shard whose range of window starts holds r.
      const std::size_t s = static_cast<std::size_t>(std::upper_bound(window_starts_.begin(), window_starts_.end(), r) -
                                                     window_starts_.begin() - 1);
      const std::int64_t start = (r - window_starts_[s]) * (row_tokens_ > 0 ? T : 1);
      read_window(s, start, T + 1, w);  // (T + 1)
      std::memcpy(inputs + b * T, w, T * sizeof(std::int32_t));
      std::memcpy(targets + b * T, w + 1, T * sizeof(std::int32_t));
      apply_mask(s, start, T, targets + b * T);
    }
  }
  ++batches_;
}

void DataLoader::reset() {
  shard_ = 0;
  position_ = 0;
  rng_.set_state(config_.seed);
  batches_ = 0;
}

DataLoaderState DataLoader::state() const { return DataLoaderState{shard_, position_, rng_.state(), batches_}; }

void DataLoader::set_state(const DataLoaderState& state) {
  const std::int64_t BT = static_cast<std::int64_t>(config_.B) * config_.T * config_.ranks;
  if (state.shard >= shards_.size()) {
    fail(kWhere, "saved state points at shard " + std::to_string(state.shard) + " but there are " +
                     std::to_string(shards_.size()) + " shards; resume with the same data");
  }
  if (state.position < 0 ||
      (config_.mode == SampleMode::Sequential && state.position + BT + 1 > shards_[state.shard].size())) {
    fail(kWhere, "saved state has position " + std::to_string(state.position) + " in " + shards_[state.shard].path() +
                     ", which holds " + std::to_string(shards_[state.shard].size()) + " tokens (a batch needs " +
                     std::to_string(BT + 1) + "); resume with the same data, B and T");
  }
  shard_ = static_cast<std::size_t>(state.shard);
  position_ = state.position;
  rng_.set_state(state.rng);
  batches_ = state.batches;
}

std::int64_t DataLoader::batches_per_epoch() const {
  const std::int64_t BT = static_cast<std::int64_t>(config_.B) * config_.T * config_.ranks;
  std::int64_t n = 0;
  for (const TokenFile& f : shards_) n += (f.size() - 1) / BT;
  return n;
}

}  // namespace llmcc
