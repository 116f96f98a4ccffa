#include "llmcc/train/rng.h"

#include <cmath>
#include <numbers>

#include "llmcc/error.h"

namespace llmcc {
namespace {

// One Box-Muller pair from two uniforms; 1 - u1 lies in (0, 1], so the log is finite.
void box_muller(double u1, double u2, double* c, double* s) {
  const double r = std::sqrt(-2.0 * std::log(1.0 - u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  *c = r * std::cos(angle);
  *s = r * std::sin(angle);
}

}  // namespace

std::uint64_t Rng::below(std::uint64_t n) {
  if (n == 0) fail("rng", "below(n) needs n > 0, got 0");
  // Outputs below 2^64 mod n would make the low residues more likely; reject them.
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    const std::uint64_t r = next_u64();
    if (r >= threshold) return r % n;
  }
}

double Rng::normal(double mean, double std) {
  const double u1 = uniform_f64();
  const double u2 = uniform_f64();
  double c = 0.0, s = 0.0;
  box_muller(u1, u2, &c, &s);
  return mean + std * c;
}

void Rng::fill_normal(float* out, std::size_t n, float mean, float std) {
  std::size_t i = 0;
  for (; i + 1 < n; i += 2) {
    const double u1 = uniform_f64();
    const double u2 = uniform_f64();
    double c = 0.0, s = 0.0;
    box_muller(u1, u2, &c, &s);
    out[i] = static_cast<float>(mean + std * c);
    out[i + 1] = static_cast<float>(mean + std * s);
  }
  if (i < n) out[i] = static_cast<float>(normal(mean, std));
}

}  // namespace llmcc
