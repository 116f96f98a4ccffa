// What the model parity tests (tests/models/test_*_parity.cpp) share: reading a fixture directory
// written by a reference script in scripts/ (raw little-endian arrays, batch.bin, the key=value
// reference.txt), the relative-error measure the tolerances are stated in, AdamW's settings from
// the reference, and a parameterised test base that runs each check with the fast and the
// reference kernels on 1 and 2 threads.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmcc/runtime.h"
#include "llmcc/tensor.h"
#include "llmcc/train/adamw.h"
#include "llmcc/io/checkpoint.h"

namespace llmcc::test {

// A fixture directory, tests/fixtures/<name>/, and the script that writes it (for messages).
struct FixtureDir {
  std::string dir;     // ends with '/'
  std::string script;  // "scripts/gpt2_reference.py"

  std::string path(const std::string& name) const { return dir + name; }

  std::string read(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    if (!in) throw std::runtime_error("cannot open fixture " + path(name) + " (run " + script + ")");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // The file as an array of T (little-endian, as this machine).
  template <class T>
  std::vector<T> array(const std::string& name) const {
    const std::string bytes = read(name);
    if (bytes.size() % sizeof(T) != 0) {
      throw std::runtime_error("fixture " + path(name) + " has " + std::to_string(bytes.size()) +
                               " bytes, not a whole number of " + std::to_string(sizeof(T)) + "-byte values");
    }
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
  }
};

// The numbers of a whitespace-separated value ("4.1 3.8 3.5").
inline std::vector<double> numbers(const std::string& text) {
  std::istringstream in(text);
  std::vector<double> out;
  for (double x; in >> x;) out.push_back(x);
  return out;
}

// reference.txt: key=value lines (llmcc's checkpoint config format).
struct Reference {
  KeyValues kv;
  static Reference read(const FixtureDir& fx) {
    return {parse_key_values(fx.read("reference.txt"), fx.path("reference.txt"))};
  }
  double number(const std::string& key) const { return numbers(kv.at(key)).at(0); }
  std::vector<double> list(const std::string& key) const { return numbers(kv.at(key)); }

  // adamw.beta1, adamw.beta2, adamw.eps, adamw.weight_decay (decay on ndim >= 2 only, as
  // torch.optim.AdamW with the scripts' two parameter groups).
  AdamWConfig adamw() const {
    AdamWConfig cfg;
    cfg.beta1 = static_cast<float>(number("adamw.beta1"));
    cfg.beta2 = static_cast<float>(number("adamw.beta2"));
    cfg.eps = static_cast<float>(number("adamw.eps"));
    cfg.weight_decay = static_cast<float>(number("adamw.weight_decay"));
    return cfg;
  }
};

// batch.bin: int32 B, T, then idx (B, T) row-major, then targets (B, T); a target of -1 is ignored.
struct Batch {
  int B = 0, T = 0;
  std::vector<std::int32_t> idx, targets;  // (B, T) each

  static Batch read(const FixtureDir& fx) {
    const auto data = fx.array<std::int32_t>("batch.bin");
    Batch b;
    b.B = data.at(0);
    b.T = data.at(1);
    const std::size_t n = static_cast<std::size_t>(b.B) * static_cast<std::size_t>(b.T);
    if (data.size() != 2 + 2 * n) {
      throw std::runtime_error("fixture " + fx.path("batch.bin") + " has " + std::to_string(data.size()) +
                               " int32 values, expected 2 + 2 * B * T = " + std::to_string(2 + 2 * n));
    }
    b.idx.assign(data.begin() + 2, data.begin() + 2 + static_cast<std::ptrdiff_t>(n));
    b.targets.assign(data.begin() + 2 + static_cast<std::ptrdiff_t>(n), data.end());
    return b;
  }
  Tokens idx_tokens() const { return {idx.data(), B, T}; }
  Tokens target_tokens() const { return {targets.data(), B, T}; }
};

// The parity tolerance's measure: max |got - ref| / max |ref| over n values, the scale floored at
// `floor` (for a tensor that is zero in exact arithmetic), and where the max error is.
struct Deviation {
  double rel = 0, abs = 0, scale = 0;
  std::int64_t at = 0;
};
inline Deviation deviation(const float* got, const float* ref, std::int64_t n, double floor = 0) {
  Deviation d;
  for (std::int64_t i = 0; i < n; ++i) {
    d.scale = std::max(d.scale, std::fabs(double(ref[i])));
    const double e = std::fabs(double(got[i]) - double(ref[i]));
    if (!(e <= d.abs)) d.abs = e, d.at = i;  // NaN-proof
  }
  d.scale = std::max(d.scale, floor);
  d.rel = d.scale > 0 ? d.abs / d.scale : d.abs;
  return d;
}

// Kernel mode and thread count of one parity run.
struct ParityMode {
  KernelMode kernels;
  int threads;
};
inline std::string parity_mode_name(const ::testing::TestParamInfo<ParityMode>& info) {
  return std::string(info.param.kernels == KernelMode::Fast ? "Fast" : "Reference") + "_" +
         std::to_string(info.param.threads) + "thread";
}
// Instantiate a ParityTest subclass with: INSTANTIATE_TEST_SUITE_P(Modes, X, kParityModes, parity_mode_name).
inline const auto kParityModes =
    ::testing::Values(ParityMode{KernelMode::Fast, 1}, ParityMode{KernelMode::Fast, 2},
                      ParityMode{KernelMode::Reference, 1}, ParityMode{KernelMode::Reference, 2});

// Sets the mode's kernels and threads for the test and restores the previous ones afterwards.
class ParityTest : public ::testing::TestWithParam<ParityMode> {
 protected:
  void SetUp() override {
    threads_before_ = num_threads();
    mode_before_ = kernel_mode();
    set_kernel_mode(GetParam().kernels);
    set_num_threads(GetParam().threads);
  }
  void TearDown() override {
    set_kernel_mode(mode_before_);
    set_num_threads(threads_before_);
  }

 private:
  int threads_before_ = 1;
  KernelMode mode_before_ = KernelMode::Fast;
};

}  // namespace llmcc::test
