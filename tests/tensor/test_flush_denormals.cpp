// set_flush_denormals (llmcc/runtime.h): subnormal operands and results read and written as zero
// on the calling thread and on every thread of the OpenMP team, and back to IEEE when turned off.
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "llmcc/runtime.h"

namespace {

// tiny * 1 on each of the team's threads: a subnormal, or zero when flushed.
std::vector<float> products_on_team(float tiny) {
  std::vector<float> out(static_cast<std::size_t>(omp_get_max_threads()), -1.0f);
#pragma omp parallel
  {
    volatile float a = tiny, b = 1.0f;  // volatile: computed at run time, under MXCSR
    out[static_cast<std::size_t>(omp_get_thread_num())] = a * b;
  }
  return out;
}

TEST(FlushDenormals, FlushesOnEveryThreadAndTurnsOff) {
  const bool was = llmcc::flush_denormals();
  llmcc::set_num_threads(2);
  const float tiny = 1e-39f;  // below FLT_MIN (1.18e-38): subnormal
  llmcc::set_flush_denormals(false);
  EXPECT_FALSE(llmcc::flush_denormals());
  for (float v : products_on_team(tiny)) EXPECT_EQ(v, tiny);
  llmcc::set_flush_denormals(true);
  EXPECT_TRUE(llmcc::flush_denormals());
  for (float v : products_on_team(tiny)) EXPECT_EQ(v, 0.0f);
  volatile float a = 3e-39f, b = 0.5f;
  EXPECT_EQ(a * b, 0.0f) << "the calling thread";
  llmcc::set_flush_denormals(was);
}

}  // namespace
