// Checkpoints: the whole training state in one binary file, written atomically.
//
// A checkpoint file (format in docs/data-format.md) is a table of named sections: tensor sets
// (each tensor with its name, shape and fp32 data) and blobs (bytes; key=value text here),
// closed by a CRC-32 of everything before it. The trainer's file holds
//   params            the weights                         (tensors)
//   adamw.m, adamw.v  AdamW's moments (absent when the file holds only weights)
//   state             key=value text: step, adamw.t, data (DataLoaderState), rng.<name>, val_loss
//   config            key=value text: the run's configuration
//   file.<name>       bytes of a file the run carries (optional; file.tokenizer.model)
// The learning-rate schedule is a function of the step, so the step is its position.
//
// Writing goes to <path>.tmp, is fsynced, renamed over <path>, and the directory fsynced, so a
// crash mid-write leaves the previous file intact. Reading checks magic, version, size and
// checksum before anything else, then every offset, and throws llmcc::Error naming the file and
// the problem; loading into a model of another layout names the tensor:
//   "[checkpoint] run/ckpt_000100.bin: h.3.attn.c_attn.weight has shape (2304, 768) in the
//    checkpoint, (1152, 384) in the model"
// and leaves the model untouched.
//
//   save_checkpoint_in_dir("run", /*keep_last=*/3, params, &opt, state);  // run/ckpt_000100.bin
//   if (auto last = latest_usable_checkpoint("run")) state = load_checkpoint(*last, params, &opt);
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "llmcc/parameters.h"
#include "llmcc/train/adamw.h"
#include "llmcc/train/data_loader.h"

namespace llmcc {

// Sorted key=value lines. Keys may not contain '=', '\n' or be empty; values may not contain '\n'.
using KeyValues = std::map<std::string, std::string>;
std::string format_key_values(const KeyValues& kv);
// `where` names the source in errors (e.g. the file and section).
KeyValues parse_key_values(const std::string& text, const std::string& where);

// ---- the file format: sections of tensors and blobs ---------------------------------------

class CheckpointWriter {
 public:
  // The store is read during save(); keep it alive until then.
  void add_tensors(const std::string& section, const ParameterStore& store);
  void add_blob(const std::string& section, std::string bytes);
  // Writes atomically; throws llmcc::Error on I/O failure or duplicate section names.
  void save(const std::string& path) const;

 private:
  struct Section {
    std::string name;
    const ParameterStore* store = nullptr;  // tensors, or
    std::string blob;                       // bytes
  };
  std::vector<Section> sections_;
};

struct CheckpointTensorInfo {
  std::string name;
  Shape shape;
};

class CheckpointReader {
 public:
  // Maps the file and validates it completely (header, checksum, section table, tensor tables).
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;

  const std::string& path() const;
  std::vector<std::string> sections() const;
  bool has(const std::string& section) const;

  std::vector<CheckpointTensorInfo> tensors(const std::string& section) const;
  // Copies the section's tensors into the store's tensors of the same names. Every model tensor
  // must be present with the same shape and every checkpoint tensor used; otherwise throws,
  // naming the first mismatch, before writing anything.
  void read_tensors(const std::string& section, ParameterStore& into) const;
  // The checks of read_tensors without the copy.
  void check_tensors(const std::string& section, const ParameterStore& like) const;
  std::string blob(const std::string& section) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- the trainer's checkpoint -------------------------------------------------------------

struct TrainState {
  std::int64_t step = 0;                      // optimizer steps completed
  DataLoaderState data;                       // the training loader's position
  std::map<std::string, std::uint64_t> rngs;  // named Rng states, e.g. {"sample", ...}
  // The run's last validation loss before this state, when it had one: the divergence guard's
  // reference for the next validation after a resume.
  std::optional<float> val_loss;
  KeyValues config;  // the run's configuration
  // Files the run carries with it, saved as blob sections "file.<name>" (e.g. "tokenizer.model":
  // the SentencePiece model of the run's data, so `llmcc generate` needs nothing else).
  std::map<std::string, std::string> files;
  bool operator==(const TrainState&) const = default;
};

// opt may be null: the file then holds weights only (no adamw.m / adamw.v).
void save_checkpoint(const std::string& path, const ParameterStore& params, const AdamW* opt, const TrainState& state);
// Loads weights (and, when opt is not null, AdamW's moments and step count) and returns the
// state. With opt non-null, a weights-only file is an error (it cannot resume).
TrainState load_checkpoint(const std::string& path, ParameterStore& params, AdamW* opt);

// ---- a directory of checkpoints -----------------------------------------------------------

// "Newest" is the most recently WRITTEN, not the highest step: a run resumed from an earlier
// checkpoint writes lower steps than the abandoned branch it left behind, and its own files are
// the ones to keep and resume. The write order is kept in dir/checkpoints.txt (file names, oldest
// first), which save_checkpoint_in_dir updates; checkpoints it does not name (written by an older
// llmcc, or copied in) count as older than those it names, and among themselves by step.
//
// A checkpoint is confirmed when the trainer judged the state it holds before writing it (its
// validation loss, or the loss of the batch the next step trains on, within the spike factor:
// docs/training.md), unconfirmed when that judgement failed; checkpoints.txt marks the
// unconfirmed ones ("ckpt_000100.bin unconfirmed"). A checkpoint of an llmcc before the marks, or
// one the list does not name, is usable as it was then.
enum class CheckpointStatus {
  confirmed,    // in checkpoints.txt, unmarked
  unconfirmed,  // in checkpoints.txt, marked
  unlisted,     // not in checkpoints.txt
};
// Whether rollbacks, the guard's error and --resume auto may return to it: all but unconfirmed.
bool usable(CheckpointStatus status);

struct CheckpointEntry {
  std::int64_t step = 0;
  std::string path;
  CheckpointStatus status = CheckpointStatus::unlisted;
};

// dir/ckpt_000100.bin (at least 6 digits).
std::string checkpoint_path(const std::string& dir, std::int64_t step);
// Every dir/ckpt_<digits>.bin, oldest written first; an absent directory has none.
std::vector<CheckpointEntry> list_checkpoint_entries(const std::string& dir);
// (step, path) of the same, in the same order.
std::vector<std::pair<std::int64_t, std::string>> list_checkpoints(const std::string& dir);
// The most recently written checkpoint, whatever its status.
std::optional<std::string> latest_checkpoint(const std::string& dir);
// The most recently written usable checkpoint (what `--resume auto` continues).
std::optional<std::string> latest_usable_checkpoint(const std::string& dir);
// The status its directory's checkpoints.txt records for the checkpoint at `path`.
CheckpointStatus checkpoint_status(const std::string& path);
// Deletes all but the keep_last most recently written checkpoints (keep_last >= 1) and the newest
// usable one, and any leftover .tmp from interrupted writes.
void prune_checkpoints(const std::string& dir, int keep_last);
// Creates dir if needed, saves checkpoint_path(dir, state.step) (replacing a file of that step),
// records it as the newest written with its status, prunes (never the file just written); returns
// the path.
std::string save_checkpoint_in_dir(const std::string& dir, int keep_last, const ParameterStore& params,
                                   const AdamW* opt, const TrainState& state, bool confirmed = true);

}  // namespace llmcc
