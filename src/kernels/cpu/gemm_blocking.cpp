#include "kernels/cpu/gemm_blocking.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/gemm_packed.h"
#include "llmcc/error.h"
#include "tensor/large_alloc.h"

namespace llmcc {
namespace cpu {
namespace {

namespace fs = std::filesystem;
using packed::kMR;
using packed::kNR;

// A candidate replaces the built-in blocking only when at least this much faster: the two
// products take about 10 ms each, and a shared machine's noise between trials is a few percent.
constexpr double kTuneMargin = 0.03;
constexpr int kTrials = 5;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string kib(long bytes) {
  if (bytes >= (1L << 20) && bytes % (1L << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

// "32K", "1024K", "32M" (sysfs cache sizes) -> bytes; 0 when unreadable.
long parse_size(const std::string& text) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || v <= 0) return 0;
  if (*end == 'K') return v << 10;
  if (*end == 'M') return v << 20;
  if (*end == 'G') return v << 30;
  return v;
}

std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The first processor's fields of /proc/cpuinfo named in `keys`, in that order ("" if absent).
std::vector<std::string> cpuinfo_fields(const std::vector<std::string>& keys) {
  std::vector<std::string> values(keys.size());
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line) && !line.empty()) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (key == keys[i]) values[i] = value;
  }
  return values;
}

// What the cached blocking is for besides the CPU: the micro-kernel, the compiler, the way the
// measurement is made ("measure 2": op(B) and C evicted before each timed call, medians of
// per-round ratios) and the built-in blocking it was measured against, so that a cache made by
// another build, an older measurement or against another built-in blocking is measured again.
std::string build_description() {
  return std::string(gemm_packed_kernel_name()) + ", measure 2 against " + to_string(builtin_gemm_blocking()) + ", " +
#if defined(__clang__)
         "clang " + std::to_string(__clang_major__) + "." + std::to_string(__clang_minor__);
#elif defined(__GNUC__)
         "gcc " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__);
#else
         "unknown compiler";
#endif
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// ---- choosing the blocking -----------------------------------------------------------------

// The field of `b` named `key` (kc, mc, nc, stream_a, stream_rows: the cache file's and
// to_string's names), else null.
int* blocking_field(GemmBlocking& b, const std::string& key) {
  return key == "kc"            ? &b.kc
         : key == "mc"          ? &b.mc
         : key == "nc"          ? &b.nc
         : key == "stream_a"    ? &b.stream_a
         : key == "stream_rows" ? &b.stream_rows
                                : nullptr;
}

// stream_rows is the only field that may be 0 (no product streams).
int min_field_value(const std::string& key) { return key == "stream_rows" ? 0 : 1; }

struct State {
  std::mutex mutex;
  bool chosen = false;
  bool mode_set = false;
  GemmTune mode = GemmTune::Auto;
  GemmBlockingInfo info;
};
State& state() {
  static State s;
  return s;
}

// Written whole to a temporary file and renamed over the old one: a reader never sees half a
// file. Returns false (and says why on stderr) when the directory cannot be written.
bool write_cache(const fs::path& path, const GemmBlocking& b, const std::string& cpu, const GemmTuneResult& r) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", r.seconds);
    out << "# llmcc's GEMM cache blocking for one CPU and build, measured in " << seconds
        << " s (docs/perf.md, \"GEMM blocking and autotuning\").\n"
        << "# Delete this file, or run with LLMCC_GEMM_TUNE=redo, to measure again.\n";
    std::istringstream table(r.table);
    for (std::string row; std::getline(table, row);) out << "# " << row << "\n";
    out << "cpu " << cpu << "\nbuild " << build_description() << "\nkc " << b.kc << "\nmc " << b.mc << "\nnc " << b.nc
        << "\nstream_a " << b.stream_a << "\nstream_rows " << b.stream_rows << "\n";
    if (!out.flush()) {
      std::fprintf(stderr, "llmcc: cannot write the GEMM tuning cache %s; the measured blocking is used but not kept\n",
                   tmp.c_str());
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::fprintf(stderr, "llmcc: cannot write the GEMM tuning cache %s (%s)\n", path.c_str(), ec.message().c_str());
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

// Holds an exclusive lock on `path` (created if need be) while alive, so that processes
// starting together (ranks of one job, tests) measure once and the others read the result.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

GemmBlockingInfo measure_and_keep(const fs::path& path, const std::string& cpu) {
  const GemmTuneResult r = tune_gemm_blocking(cpu_caches());
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", r.seconds);
  std::string source = std::string("measured now in ") + seconds + " s";
  if (path.empty()) {
    source += " (not kept: no cache directory, set LLMCC_TUNE_CACHE)";
  } else if (write_cache(path, r.blocking, cpu, r)) {
    source += ", saved to " + path.string();
  }
  return {r.blocking, source, cpu};
}

GemmBlockingInfo choose(GemmTune mode) {
  const std::string cpu = cpu_description();
  if (mode == GemmTune::Off) {
    return {builtin_gemm_blocking(), std::string("built in for ") + gemm_packed_kernel_name() + " (tuning off)", cpu};
  }
  const fs::path path = gemm_tune_cache_path();
  if (path.empty()) return measure_and_keep(path, cpu);
  const FileLock lock(path.string() + ".lock");
  if (mode == GemmTune::Auto) {
    std::string why;
    if (const std::optional<GemmBlocking> b = read_gemm_tune_cache(path.string(), cpu, why))
      return {*b, "read from " + path.string(), cpu};
    if (!why.empty())
      std::fprintf(stderr, "llmcc: ignoring the GEMM tuning cache %s: %s; measuring again\n", path.c_str(),
                   why.c_str());
  }
  return measure_and_keep(path, cpu);
}

// Makes the choice if none is made (caller holds the mutex).
void ensure_chosen(State& s) {
  if (s.chosen) return;
  if (!s.mode_set) {
    const std::string value = env("LLMCC_GEMM_TUNE");
    if (!value.empty()) {
      try {
        s.mode = parse_gemm_tune(value);
      } catch (const Error&) {
        fail("gemm blocking", "LLMCC_GEMM_TUNE is '" + value + "', expected auto, off or redo");
      }
    }
    s.mode_set = true;
  }
  s.info = choose(s.mode);
  s.chosen = true;
}

// ---- the measurement -----------------------------------------------------------------------

struct Product {
  const char* name;
  bool trans_a, trans_b;
  int M, N, K;
};

// A forward product of a training step at B x T = 256 (x (256, 768) . W^T, W (3072, 768)): the
// streaming order. A weight gradient at B x T = 1,024 (dW (1024, 768) = dY^T . X, K = 1,024
// tokens): the blocked order, with K long enough that KC decides the slice count.
constexpr Product kStreamProduct{"streaming 256x3072x768", false, true, 256, 3072, 768};
constexpr Product kBlockedProduct{"blocked 1024x768x1024", true, false, 1024, 768, 1024};
// The forward product at 128 to 512 rows, where either order may be the faster one: the
// streaming order packs all rows of op(A) per slice, so more rows mean shallower slices (more
// passes over C), while the blocked order packs each KC x NC block of op(B) before using it.
constexpr Product kOrderProducts[] = {{"order 128x3072x768", false, true, 128, 3072, 768},
                                      {"order 256x3072x768", false, true, 256, 3072, 768},
                                      {"order 384x3072x768", false, true, 384, 3072, 768},
                                      {"order 512x3072x768", false, true, 512, 3072, 768}};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Writes back and drops n floats at p from every cache level.
void evict(const float* p, std::size_t n) {
#if defined(__x86_64__) || defined(__i386__)
  for (std::size_t i = 0; i < n; i += 64 / sizeof(float)) {
#if defined(__CLFLUSHOPT__)
    _mm_clflushopt(const_cast<float*>(p + i));
#else
    _mm_clflush(p + i);
#endif
  }
  _mm_sfence();
#else
  (void)p, (void)n;
#endif
}

// n floats from allocate_large: on the pages a training step's buffers get (huge pages where
// the kernel offers them). On 4 KB pages, packing an op(B) panel walks a page per row of a
// weight, and the page walks (nested ones, in a VM) would weigh in the figures as they do not in
// a step (docs/perf.md, "GEMM blocking and autotuning").
class LargeFloats {
 public:
  explicit LargeFloats(std::size_t n) : data_(static_cast<float*>(allocate_large(n * sizeof(float)))) {
    if (!data_) fail("gemm blocking", "out of memory for the tuning's operands (" + std::to_string(n) + " floats)");
  }
  ~LargeFloats() { std::free(data_); }
  LargeFloats(const LargeFloats&) = delete;
  LargeFloats& operator=(const LargeFloats&) = delete;
  float* data() const { return data_; }

 private:
  float* data_;
};

// Floats of op(A), op(B) and C of a product, and the most any product measured needs.
std::size_t a_floats(const Product& p) { return static_cast<std::size_t>(p.M) * p.K; }
std::size_t b_floats(const Product& p) { return static_cast<std::size_t>(p.K) * p.N; }
std::size_t c_floats(const Product& p) { return static_cast<std::size_t>(p.M) * p.N; }
std::size_t largest(std::size_t (*floats)(const Product&)) {
  std::size_t n = std::max(floats(kStreamProduct), floats(kBlockedProduct));
  for (const Product& p : kOrderProducts) n = std::max(n, floats(p));
  return n;
}

class Bench {
 public:
  Bench() : a_(largest(a_floats)), b_(largest(b_floats)), c_(largest(c_floats)) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (std::size_t i = 0, n = largest(a_floats); i < n; ++i) a_.data()[i] = u(rng);
    for (std::size_t i = 0, n = largest(b_floats); i < n; ++i) b_.data()[i] = u(rng);
  }

  // Each blocking's rate on product p, from kTrials rounds that run every blocking once in turn
  // (after an untimed round; every other round in reverse order), each call finding op(B) and C
  // in memory, as a training step finds a weight (or the activations a weight gradient reads)
  // and its output. Its speed-up is the median over the rounds of blocking 0's time in that
  // round over its own: a slow spell of a shared machine slows one round of every blocking
  // alike, and a lucky one moves a median no more than any other round does.
  struct Rates {
    std::vector<double> gflops;   // median GFLOP/s
    std::vector<double> speedup;  // against blockings[0]
  };
  Rates rates(const std::vector<GemmBlocking>& blockings, const Product& p) {
    const int lda = p.trans_a ? p.M : p.K, ldb = p.trans_b ? p.K : p.N;
    const std::size_t n = blockings.size();
    std::vector<std::vector<double>> seconds(n);
    for (int round = 0; round <= kTrials; ++round) {
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t i = round % 2 == 0 ? j : n - 1 - j;
        evict(b_.data(), static_cast<std::size_t>(p.K) * p.N);
        evict(c_.data(), static_cast<std::size_t>(p.M) * p.N);
        const auto t0 = std::chrono::steady_clock::now();
        gemm_packed_with(blockings[i], 1, p.trans_a, p.trans_b, p.M, p.N, p.K, 1.0f, a_.data(), lda, b_.data(), ldb,
                         0.0f, c_.data(), p.N, nullptr);
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (round > 0) seconds[i].push_back(dt);
      }
    }
    Rates r{std::vector<double>(n), std::vector<double>(n)};
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<double> ratio(kTrials);
      for (int t = 0; t < kTrials; ++t) ratio[t] = seconds[0][t] / seconds[i][t];
      r.speedup[i] = median(ratio);
      r.gflops[i] = 2.0 * p.M * p.N * p.K / median(seconds[i]) * 1e-9;
    }
    return r;
  }

 private:
  LargeFloats a_, b_, c_;
};

// The smallest stream_a that holds `rows` rows of the streaming order (padded to whole tiles; at
// least one) times 16 values of K.
int min_stream_a(int rows) { return (std::max(rows, 1) + kMR - 1) / kMR * kMR * 16; }

int round_down(long v, int unit) { return static_cast<int>(std::max<long>(unit, v / unit * unit)); }

void add_unique(std::vector<int>& v, int x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

GemmBlocking current_gemm_blocking() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  ensure_chosen(s);
  return s.info.blocking;
}

std::optional<GemmBlocking> read_gemm_tune_cache(const std::string& path, const std::string& cpu, std::string& why) {
  std::ifstream in(path);
  if (!in) {
    why = "";  // no file yet: nothing to warn about
    return std::nullopt;
  }
  GemmBlocking b;
  b.stream_rows = -1;  // required: a file without it is from before the order was measured
  std::string line, file_cpu, file_build;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.find(' ');
    const std::string key = line.substr(0, space), value = space == std::string::npos ? "" : line.substr(space + 1);
    int* field = blocking_field(b, key);
    if (key == "cpu") {
      file_cpu = value;
    } else if (key == "build") {
      file_build = value;
    } else if (field) {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < min_field_value(key) || v > (1L << 30)) {
        why = "line " + std::to_string(line_no) + ": " + key + " is '" + value + "', expected " +
              (min_field_value(key) == 0 ? "a non-negative" : "a positive") + " integer";
        return std::nullopt;
      }
      *field = static_cast<int>(v);
    } else {
      why = "line " + std::to_string(line_no) + ": unknown key '" + key +
            "' (expected cpu, build, kc, mc, nc, stream_a, stream_rows)";
      return std::nullopt;
    }
  }
  if (file_cpu != cpu || file_build != build_description()) {
    why = "it was measured for another CPU or build ('" + file_cpu + "', '" + file_build + "')";
    return std::nullopt;
  }
  if (b.kc == 0 || b.mc == 0 || b.nc == 0 || b.stream_a == 0 || b.stream_rows < 0) {
    why = "it lacks one of kc, mc, nc, stream_a, stream_rows";
    return std::nullopt;
  }
  try {
    validate_gemm_blocking(b);
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
  return b;
}

void validate_gemm_blocking(const GemmBlocking& b) {
  const auto need = [](bool ok, const std::string& what) {
    if (!ok) fail("gemm blocking", what);
  };
  need(b.kc >= 16 && b.kc <= 4096 && b.kc % 2 == 0,
       "kc is " + std::to_string(b.kc) + ", expected an even number from 16 to 4096");
  need(b.mc >= kMR && b.mc <= 8192 && b.mc % kMR == 0, "mc is " + std::to_string(b.mc) + ", expected a multiple of " +
                                                           std::to_string(kMR) +
                                                           " (the micro-kernel's rows) up to 8192");
  need(b.nc >= kNR && b.nc <= 65536 && b.nc % kNR == 0, "nc is " + std::to_string(b.nc) + ", expected a multiple of " +
                                                            std::to_string(kNR) +
                                                            " (the micro-kernel's columns) up to 65536");
  need(b.stream_rows >= 0 && b.stream_rows <= kStreamMaxRows,
       "stream_rows is " + std::to_string(b.stream_rows) + ", expected 0 to " + std::to_string(kStreamMaxRows));
  // The streaming order's slice holds all its rows (up to stream_rows, padded to whole tiles)
  // times at least 16 values of K.
  const int min_stream = min_stream_a(b.stream_rows);
  need(b.stream_a >= min_stream && b.stream_a <= (1 << 24),
       "stream_a is " + std::to_string(b.stream_a) + ", expected at least " + std::to_string(min_stream) +
           " floats (the streaming order's " + std::to_string(std::max(b.stream_rows, 1)) +
           " rows, padded to whole tiles, times 16 values of K) and at most 16M");
}

CpuCaches cpu_caches() {
  CpuCaches c;
  const fs::path root = "/sys/devices/system/cpu/cpu0/cache";
  for (int i = 0; i < 8; ++i) {
    const fs::path dir = root / ("index" + std::to_string(i));
    const std::string level = read_line(dir / "level"), type = read_line(dir / "type");
    const long size = parse_size(read_line(dir / "size"));
    if (level.empty()) continue;
    if (level == "1" && type == "Data") c.l1d = size;
    if (level == "2") c.l2 = size;
    if (level == "3") c.l3 = size;
  }
  return c;
}

std::string cpu_description() {
  const std::vector<std::string> f = cpuinfo_fields({"model name", "cpu family", "model", "stepping"});
  const CpuCaches c = cpu_caches();
  std::string s = f[0].empty() ? std::string("unknown CPU") : f[0];
  s += " (family " + f[1] + " model " + f[2] + " stepping " + f[3] + ");";
  s += " L1d " + (c.l1d ? kib(c.l1d) : std::string("?")) + ", L2 " + (c.l2 ? kib(c.l2) : std::string("?")) + ", L3 " +
       (c.l3 ? kib(c.l3) : std::string("?"));
  return s;
}

int choose_stream_rows(const std::function<bool(int rows)>& streaming_holds) {
  if (!streaming_holds(256)) return streaming_holds(128) ? 128 : 0;
  int rows = 256;
  for (const int more : {384, 512}) {
    if (!streaming_holds(more)) break;
    rows = more;
  }
  return rows;
}

GemmTuneResult tune_gemm_blocking(const CpuCaches& caches) {
  const auto start = std::chrono::steady_clock::now();
  const GemmBlocking builtin = builtin_gemm_blocking();
  Bench bench;
  std::ostringstream table;
  char row[192];
  const auto line = [&](const GemmBlocking& b, const Product& p, double gflops, double speedup, const char* note) {
    std::snprintf(row, sizeof row, "%-24s kc %4d mc %4d nc %5d stream_a %7d stream_rows %3d: %6.1f GFLOP/s %5.3fx%s\n",
                  p.name, b.kc, b.mc, b.nc, b.stream_a, b.stream_rows, gflops, speedup, note);
    table << row;
  };

  // The candidate at index 0 is the one to beat; another replaces it when kTuneMargin faster.
  const auto pick = [&](const std::vector<GemmBlocking>& candidates, const Product& p) {
    const Bench::Rates r = bench.rates(candidates, p);
    std::size_t best = 0;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      line(candidates[i], p, r.gflops[i], r.speedup[i], i == 0 ? "  (to beat)" : "");
      if (r.speedup[i] > r.speedup[best] && r.speedup[i] > 1 + kTuneMargin) best = i;
    }
    return candidates[best];
  };

  // 1. kc and mc on the blocked product. An op(B) panel (KC x NR floats) in three quarters of L1,
  // or 256 or 512 values deep; an op(A) block (MC x KC) in half of L2, or half of that.
  std::vector<int> kcs = {builtin.kc};
  if (caches.l1d > 0) add_unique(kcs, std::clamp(round_down(caches.l1d * 3 / 4 / (4 * kNR), 32), 128, 1024));
  add_unique(kcs, 256);
  add_unique(kcs, 512);
  std::vector<GemmBlocking> blocked = {builtin};
  for (const int kc : kcs) {
    std::vector<int> mcs;
    if (caches.l2 > 0) {
      const int mc_l2 = std::clamp(round_down(caches.l2 / 2 / (4L * kc), kMR), 4 * kMR, 1024 / kMR * kMR);
      mcs = {mc_l2, std::max(4 * kMR, round_down(mc_l2 / 2, kMR))};
    } else {
      mcs = {builtin.mc};
    }
    for (const int mc : mcs) {
      GemmBlocking b = builtin;
      b.kc = kc;
      b.mc = mc;
      if (std::find(blocked.begin(), blocked.end(), b) == blocked.end()) blocked.push_back(b);
    }
  }
  GemmBlocking best = pick(blocked, kBlockedProduct);

  // 2. stream_a on the streaming product, with the kc chosen: a slice of its 256 rows (padded to
  // whole tiles) 192, 256 or 384 values of K deep, where that fits in three quarters of L2 (a
  // slice a little short of a depth that divides K costs a whole extra slice). With a known L2
  // that holds them, 512 and 768 deep too: K = 768 in one slice reads and writes C once instead
  // of twice. A slice is at most KC deep, so those raise KC, which the blocked order shares:
  // they go on only if the blocked product stays within kTuneMargin of step 1's choice (their
  // MC shrinks to keep op(A)'s block in half of L2).
  const int rows = (kStreamProduct.M + kMR - 1) / kMR * kMR;
  const int min_stream = min_stream_a(kStreamMaxRows);
  std::vector<GemmBlocking> streaming = {best};
  streaming[0].stream_a = builtin.stream_a;
  std::vector<GemmBlocking> deeper = {best};  // [0]: step 1's choice, to compare with
  for (const int depth : {192, 256, 384, 512, 768}) {
    const long floats = static_cast<long>(rows) * depth;
    if (caches.l2 > 0 ? floats * 4 > caches.l2 * 3 / 4 : depth > 384) continue;
    GemmBlocking b = streaming[0];
    b.stream_a = std::max<int>(min_stream, static_cast<int>(floats));
    if (depth > b.kc) {
      b.kc = depth;
      if (caches.l2 > 0)
        b.mc = std::clamp(round_down(caches.l2 / 2 / (4L * depth), kMR), std::min(4 * kMR, b.mc), b.mc);
      deeper.push_back(b);
    } else if (std::find(streaming.begin(), streaming.end(), b) == streaming.end()) {
      streaming.push_back(b);
    }
  }
  if (deeper.size() > 1) {
    const Bench::Rates r = bench.rates(deeper, kBlockedProduct);
    for (std::size_t i = 1; i < deeper.size(); ++i) {
      const bool keeps = r.speedup[i] >= 1 - kTuneMargin;
      line(deeper[i], kBlockedProduct, r.gflops[i], r.speedup[i],
           keeps ? "  (deeper kc: kept)" : "  (deeper kc: slower, dropped)");
      if (keeps) streaming.push_back(deeper[i]);
    }
  }
  best = pick(streaming, kStreamProduct);

  // 3. stream_rows, with the blockings chosen. The streaming order is the one to beat at every
  // size (the built-in stream_rows).
  best.stream_rows = choose_stream_rows([&](int m) {
    const Product* p =
        std::find_if(std::begin(kOrderProducts), std::end(kOrderProducts), [&](const Product& q) { return q.M == m; });
    if (p == std::end(kOrderProducts)) fail("gemm blocking", "no order product of " + std::to_string(m) + " rows");
    GemmBlocking blocked_order = best;
    blocked_order.stream_rows = m - 1;
    return pick({best, blocked_order}, *p) == best;
  });
  std::snprintf(row, sizeof row,
                "chosen: kc %d mc %d nc %d stream_a %d stream_rows %d (built in: kc %d mc %d nc %d stream_a %d "
                "stream_rows %d)\n",
                best.kc, best.mc, best.nc, best.stream_a, best.stream_rows, builtin.kc, builtin.mc, builtin.nc,
                builtin.stream_a, builtin.stream_rows);
  table << row;
  return {best, table.str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

}  // namespace cpu

GemmBlocking builtin_gemm_blocking() {
  return {cpu::packed::Isa::kKC, cpu::packed::Isa::kMC, cpu::packed::Isa::kNC, cpu::packed::Isa::kStreamA,
          cpu::kStreamMaxRows};
}

GemmTune parse_gemm_tune(const std::string& name) {
  if (name == "auto") return GemmTune::Auto;
  if (name == "off") return GemmTune::Off;
  if (name == "redo") return GemmTune::Redo;
  fail("gemm blocking", "unknown tuning mode '" + name + "' (expected auto, off or redo)");
}

void set_gemm_tune(GemmTune mode) {
  cpu::State& s = cpu::state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.mode = mode;
  s.mode_set = true;
  s.chosen = false;
}

GemmBlockingInfo gemm_blocking_info() {
  cpu::State& s = cpu::state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  cpu::ensure_chosen(s);
  return s.info;
}

void set_gemm_blocking(const GemmBlocking& blocking, const std::string& source) {
  cpu::validate_gemm_blocking(blocking);
  cpu::State& s = cpu::state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.info = {blocking, source, cpu::cpu_description()};
  s.chosen = true;
}

std::string to_string(const GemmBlocking& b) {
  return "kc=" + std::to_string(b.kc) + " mc=" + std::to_string(b.mc) + " nc=" + std::to_string(b.nc) +
         " stream_a=" + std::to_string(b.stream_a) + " stream_rows=" + std::to_string(b.stream_rows);
}

GemmBlocking parse_gemm_blocking(const std::string& text) {
  GemmBlocking b;
  b.stream_rows = -1;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    const std::size_t eq = word.find('=');
    const std::string key = word.substr(0, eq);
    int* field = cpu::blocking_field(b, key);
    char* end = nullptr;
    const long v = eq == std::string::npos ? 0 : std::strtol(word.c_str() + eq + 1, &end, 10);
    if (!field || eq == std::string::npos || *end != '\0' || v < cpu::min_field_value(key) || v > (1L << 30))
      fail(
          "gemm blocking",
          "'" + text + "' is not of the form kc=384 mc=240 nc=4096 stream_a=66048 stream_rows=512 (at '" + word + "')");
    *field = static_cast<int>(v);
  }
  if (b.kc == 0 || b.mc == 0 || b.nc == 0 || b.stream_a == 0)
    fail("gemm blocking", "'" + text + "' lacks one of kc, mc, nc, stream_a");
  // Runs before the field existed streamed up to the built-in row count.
  if (b.stream_rows < 0) b.stream_rows = cpu::kStreamMaxRows;
  return b;
}

std::string gemm_tune_cache_path() {
  namespace fs = std::filesystem;
  fs::path dir;
  if (const std::string d = cpu::env("LLMCC_TUNE_CACHE"); !d.empty()) {
    dir = d;
  } else if (const std::string xdg = cpu::env("XDG_CACHE_HOME"); !xdg.empty()) {
    dir = fs::path(xdg) / "llmcc" / "tuning";
  } else if (const std::string home = cpu::env("HOME"); !home.empty()) {
    dir = fs::path(home) / ".cache" / "llmcc" / "tuning";
  } else {
    return {};
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(cpu::fnv1a(cpu::cpu_description() + "|" + cpu::build_description())));
  return (dir / (std::string("gemm-") + hash + ".txt")).string();
}

}  // namespace llmcc
