#include "llmcc/train/train_log.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "io/file_io.h"
#include "llmcc/error.h"

namespace llmcc {

namespace {

template <class T>
void append_number(std::string& out, T v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  out.append(buf, r.ptr);
}

// The value of the line's "step" field, or -1 when it has none (or is not a log line of ours).
std::int64_t step_of(const std::string& line) {
  const std::string key = "\"step\": ";
  const auto at = line.find(key);
  if (at == std::string::npos) return -1;
  std::int64_t v = -1;
  const char* p = line.data() + at + key.size();
  std::from_chars(p, line.data() + line.size(), v);
  return v;
}

}  // namespace

namespace {

// The length of the well-formed UTF-8 sequence at p[0..n) (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 when the bytes there are not one.
std::size_t utf8_sequence_length(const unsigned char* p, std::size_t n) {
  const unsigned char c = p[0];
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong below U+0800
    if (c == 0xED) hi = 0x9F;  // surrogates U+D800..U+DFFF
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong below U+10000
    if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (n < len || p[1] < lo || p[1] > hi) return 0;
  for (std::size_t i = 2; i < len; ++i) {
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  }
  return len;
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = bytes[i];
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else if (c < 0x80) {
          out += static_cast<char>(c);
        } else if (const std::size_t len = utf8_sequence_length(bytes + i, text.size() - i); len > 0) {
          out.append(text.data() + i, len);
          i += len - 1;
        } else {
          // JSON text is UTF-8: a byte that is not part of a character (a sample cut mid-character,
          // a byte-level token) is written as U+FFFD, so every log line stays valid JSON.
          out += "\\ufffd";
        }
    }
  }
  out += '"';
}

JsonLine& JsonLine::begin() {
  buf_.clear();
  buf_ += '{';
  first_ = true;
  return *this;
}

void JsonLine::key(std::string_view k) {
  if (!first_) buf_ += ", ";
  first_ = false;
  append_json_string(buf_, k);
  buf_ += ": ";
}

JsonLine& JsonLine::field(std::string_view k, double v) {
  key(k);
  append_number(buf_, v);
  return *this;
}

JsonLine& JsonLine::field(std::string_view k, float v) {
  key(k);
  append_number(buf_, v);
  return *this;
}

JsonLine& JsonLine::field(std::string_view k, std::int64_t v) {
  key(k);
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  buf_.append(buf, r.ptr);
  return *this;
}

JsonLine& JsonLine::field(std::string_view k, std::string_view text) {
  key(k);
  append_json_string(buf_, text);
  return *this;
}

JsonLine& JsonLine::raw_field(std::string_view k, std::string_view json) {
  key(k);
  buf_ += json;
  return *this;
}

const std::string& JsonLine::end() {
  buf_ += '}';
  return buf_;
}

TrainLog::TrainLog(const std::string& path, std::int64_t resume_step) : path_(path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const fs::path parent = fs::path(path).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
  if (resume_step >= 0 && fs::exists(path, ec)) {
    // Keep what the interrupted run logged up to its checkpoint; drop what came after it, which
    // the resumed run is about to log again.
    std::vector<std::string> keep;
    {
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);)
        if (!line.empty() && step_of(line) <= resume_step) keep.push_back(line);
    }
    // All or nothing: on a full disk the old log stays and the partial .tmp is removed.
    detail::AtomicFile out(path, "llmcc train");
    for (const std::string& line : keep) {
      out.write(line.data(), line.size());
      out.write("\n", 1);
    }
    out.commit();
  }
  file_ = std::fopen(path.c_str(), resume_step >= 0 ? "a" : "w");
  if (file_ == nullptr) fail("llmcc train", "cannot open the log " + path + " for writing");
}

TrainLog::~TrainLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void TrainLog::write(const std::string& line) {
  if (file_ == nullptr) return;
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fputc('\n', file_);
  if (std::fflush(file_) != 0) fail("llmcc train", "cannot write the log " + path_);
}

Progress::Progress(bool quiet, std::string name)
    : quiet_(quiet), tty_(::isatty(STDOUT_FILENO) != 0), name_(std::move(name)) {}

Progress::~Progress() { finish(); }

void Progress::clear_pending() {
  if (pending_) {
    std::fputs("\r\033[K", stdout);
    pending_ = false;
  }
}

void Progress::print(const std::string& text) {
  if (quiet_) return;
  clear_pending();
  std::fputs(text.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Progress::warn(const std::string& text) {
  if (!quiet_) clear_pending();
  std::fflush(stdout);
  std::fprintf(stderr, "%s: warning: %s\n", name_.c_str(), text.c_str());
}

void Progress::step(std::int64_t step, std::int64_t steps, float loss, float lr, double grad_norm, double ms,
                    double tokens_per_s, double eta_seconds) {
  if (quiet_) return;
  char line[256];
  const int width = static_cast<int>(std::to_string(steps).size());
  std::snprintf(line, sizeof line, "step %*lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.0f ms | %.0f %s/s | ETA %s",
                width, static_cast<long long>(step), static_cast<long long>(steps), static_cast<double>(loss),
                static_cast<double>(lr), grad_norm, ms, tokens_per_s, rate_unit_.c_str(),
                format_duration(eta_seconds).c_str());
  if (tty_) {
    std::fprintf(stdout, "\r%s\033[K", line);
    pending_ = true;
  } else {
    std::fprintf(stdout, "%s\n", line);
  }
  std::fflush(stdout);
}

void Progress::finish() {
  if (pending_) {
    std::fputc('\n', stdout);
    std::fflush(stdout);
    pending_ = false;
  }
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long long s = std::llround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%llds", s);
  return buf;
}

std::string format_count(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
  else if (n >= 1e4)
    std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

std::string format_mib(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace llmcc
