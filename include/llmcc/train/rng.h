// Rng: the one random generator of llmcc (weight init, data sampling, generation).
//
// The generator is SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", 2014), stated exactly so that other code can reproduce it:
//   state += 0x9E3779B97F4A7C15;
//   z = state;
//   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//   z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//   return z ^ (z >> 31);
// Its whole state is one uint64 (period 2^64), so saving and restoring it for an exact resume
// is `uint64_t s = rng.state(); ... rng.set_state(s);`. The seed is the initial state.
//
// Derived values (all deterministic functions of the 64-bit outputs):
//   uniform()      float in [0, 1):  (next_u64() >> 40) * 2^-24
//   uniform_f64()  double in [0, 1): (next_u64() >> 11) * 2^-53
//   below(n)       integer in [0, n), unbiased (rejects outputs below 2^64 mod n)
//   normal()       Box-Muller from two uniform_f64() draws u1, u2 (one output, the other unused):
//                  sqrt(-2 ln(1 - u1)) * cos(2 pi u2), computed in double
//   fill_normal()  Box-Muller pairs: draws u1, u2 per pair and writes the cos value then the
//                  sin value; an odd tail uses the cos value of one more pair.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmcc {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) : state_(seed) {}

  std::uint64_t next_u64() {
    state_ += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  float uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  double uniform_f64() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n); n must be > 0 (throws llmcc::Error otherwise).
  std::uint64_t below(std::uint64_t n);

  // Standard normal, times std and plus mean.
  double normal(double mean = 0.0, double std = 1.0);
  // Fills out[0..n) with mean + std * N(0, 1), Box-Muller pairs (see above).
  void fill_normal(float* out, std::size_t n, float mean = 0.0f, float std = 1.0f);

  std::uint64_t state() const { return state_; }
  void set_state(std::uint64_t state) { state_ = state; }

 private:
  std::uint64_t state_;
};

}  // namespace llmcc
