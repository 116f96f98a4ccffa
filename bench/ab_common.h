// What the in-process A/B drivers (bench/gemm_ab.cpp, bench/attention_ab.cpp) share.
#pragma once

#include <algorithm>
#include <vector>

namespace llmcc_bench {

// The median of a sample of timings (the upper one of the middle two for an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace llmcc_bench
