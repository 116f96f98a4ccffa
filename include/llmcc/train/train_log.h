// The trainer's outputs: a JSON-lines log file and the progress display.
//
// Log lines (docs/training.md has the full list):
//   {"step": 12, "loss": 5.4321, "lr": 0.0006, "grad_norm": 1.23, "tokens_per_s": 2345.6, "ms": 218.3}
//   {"step": 12, "val_loss": 5.61}
//   {"step": 12, "sample": "..."}          {"step": 12, "checkpoint": "run/ckpt_000012.bin"}
//   {"step": 0, "event": "start", ...}     at the start of every invocation
// Numbers are written in their shortest exact form (a logged float reads back bit for bit);
// a non-finite number is written as null. A warm step's line is built in a reused buffer, so
// logging allocates nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

namespace llmcc {

// One JSON object, built field by field into a buffer that keeps its capacity.
class JsonLine {
 public:
  JsonLine& begin();  // clears the buffer (keeps capacity) and opens the object
  JsonLine& field(std::string_view key, double v);
  JsonLine& field(std::string_view key, float v);
  JsonLine& field(std::string_view key, std::int64_t v);
  JsonLine& field(std::string_view key, std::string_view text);  // escaped as a JSON string
  // Inserts `json` verbatim (an object or array built elsewhere).
  JsonLine& raw_field(std::string_view key, std::string_view json);
  const std::string& end();  // closes the object; returns the line (no newline)

 private:
  void key(std::string_view k);
  std::string buf_;
  bool first_ = true;
};

// Appends `text` as a JSON string literal (quotes included) to `out`: '"', '\' and control
// characters escaped, UTF-8 characters as they are, a byte that is not part of one as \ufffd
// (JSON text is UTF-8, so every line written stays readable by a strict parser).
void append_json_string(std::string& out, std::string_view text);

class TrainLog {
 public:
  // An empty path disables the log. resume_step < 0: a fresh run, the file is truncated.
  // Otherwise the run continues one resumed at that step: lines whose "step" is greater (written
  // after the checkpoint by the interrupted run) are dropped, the rest kept, and lines appended.
  TrainLog(const std::string& path, std::int64_t resume_step);
  ~TrainLog();
  TrainLog(const TrainLog&) = delete;
  TrainLog& operator=(const TrainLog&) = delete;

  void write(const std::string& line);  // one line, flushed
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The human-readable output: a header, then a progress line per step, rewritten in place on a
// terminal ('\r') and printed line by line otherwise, with other messages in between.
class Progress {
 public:
  // `name` prefixes warnings ("<name>: warning: ...").
  explicit Progress(bool quiet, std::string name = "llmcc train");
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // A permanent line (header, validation, samples, checkpoints).
  void print(const std::string& text);
  void warn(const std::string& text);  // to stderr, even when quiet
  // The step line: "step 12/1000 | loss 5.4321 | lr 6.00e-04 | norm 1.23 | 218 ms | 2346 tok/s | ETA 3m37s"
  // (`rate_unit` names what the throughput counts: "tok" by default).
  void step(std::int64_t step, std::int64_t steps, float loss, float lr, double grad_norm, double ms,
            double tokens_per_s, double eta_seconds);
  // Ends a pending in-place line.
  void finish();
  bool quiet() const { return quiet_; }
  void set_rate_unit(std::string unit) { rate_unit_ = std::move(unit); }

 private:
  void clear_pending();
  bool quiet_;
  bool tty_;
  bool pending_ = false;  // an in-place line is on screen without a newline
  std::string rate_unit_ = "tok";
  std::string name_;
};

// "1h02m", "3m37s", "12s"
std::string format_duration(double seconds);
// "124.44M", "7.27M", "1,234"-style short counts: "12.3K"
std::string format_count(double n);
std::string format_mib(std::size_t bytes);

}  // namespace llmcc
