// Inputs at the edges of their types: NaN and infinities through the fast kernels that share
// fast_exp (silu, gelu, cross-entropy), and model configs whose sizes would overflow int64.
// Each has a defined result or a clear llmcc::Error, never undefined behaviour (also checked
// under -fsanitize=undefined,float-cast-overflow).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/silu.h"
#include "kernels/ref/cross_entropy.h"
#include "kernels/ref/gelu.h"
#include "kernels/ref/silu.h"
#include "llmcc/error.h"
#include "llmcc/parameters.h"
#include "llmcc/runtime.h"
#include "models/gpt2/gpt2_config.h"
#include "models/gpt2/gpt2_weights.h"
#include "models/llama/llama_config.h"
#include "models/llama/llama_weights.h"
#include "test_support.h"

namespace llmcc {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

#if defined(__GNUC__) && !defined(__clang__)
// A constant evaluation rejects undefined behaviour: this does not compile if fast_exp converts
// its NaN to an integer. (Clang refuses any NaN-producing arithmetic in constant expressions.)
static_assert(cpu::fast_exp(kNan) != cpu::fast_exp(kNan), "fast_exp(NaN) must be NaN");
#endif
static_assert(cpu::fast_exp(-kInf) > 0.0f && cpu::fast_exp(-kInf) < 2e-38f, "exp(-inf): the clamp's exp(-87)");
static_assert(cpu::fast_exp(kInf) > 1e38f && cpu::fast_exp(kInf) < kInf, "exp(+inf): the clamp's exp(88)");

TEST(UbInputs, FastExpOfNanAndInfinities) {
  volatile float nan = kNan, inf = kInf;  // evaluated at run time, where UBSan can see it
  EXPECT_TRUE(std::isnan(cpu::fast_exp(nan)));
  EXPECT_TRUE(std::isnan(cpu::fast_exp(-nan)));
  EXPECT_LT(cpu::fast_exp(-inf), 2e-38f);
  EXPECT_GT(cpu::fast_exp(-inf), 0.0f);
  EXPECT_GT(cpu::fast_exp(inf), 1e38f);
  EXPECT_EQ(cpu::fast_sigmoid(-inf), 0.0f);
  EXPECT_EQ(cpu::fast_sigmoid(inf), 1.0f);
  EXPECT_TRUE(std::isnan(cpu::fast_sigmoid(nan)));
}

// got matches the double reference: NaN where it is NaN, the same infinity, else close.
::testing::AssertionResult same_class(const std::vector<float>& got, const std::vector<double>& ref) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], r = ref[i];
    const bool ok = std::isnan(r)   ? std::isnan(g)
                    : std::isinf(r) ? g == r
                                    : std::fabs(g - r) <= 1e-6 + 1e-5 * std::fabs(r);
    if (!ok) return ::testing::AssertionFailure() << "[" << i << "] got " << g << ", expected " << r;
  }
  return ::testing::AssertionSuccess();
}

// NaN, both infinities and finite values, repeated past a few vector widths so that the
// vectorised loops and their tails both see them.
std::vector<float> special_inputs() {
  const float pattern[] = {kNan, -kInf, kInf, -1e30f, -90.0f, -1.5f, 0.0f, 2.0f, 90.0f, 1e30f, -kNan};
  std::vector<float> x;
  for (int rep = 0; rep < 7; ++rep)
    for (float v : pattern) x.push_back(v);
  return x;
}

// silu(+inf) = +inf; silu(-inf) = -inf * 0 = NaN, as in the reference (and PyTorch).
TEST(UbInputs, SiluForwardOnNanAndInfinities) {
  const auto x = special_inputs();
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> out(x.size());       // (n)
  std::vector<double> out_ref(x.size());  // (n)
  const auto xd = test::cast_vector<double>(x);
  cpu::silu_forward(out.data(), x.data(), n);
  ref::silu_forward(out_ref.data(), xd.data(), n);
  EXPECT_TRUE(same_class(out, out_ref));
  EXPECT_EQ(out[2], kInf);

  std::vector<float> d_x(x.size(), 0.0f), d_out(x.size(), 1.0f);  // (n)
  cpu::silu_backward(d_x.data(), x.data(), d_out.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(d_x[i])) << i;
    }
    if (std::isfinite(x[i])) {
      EXPECT_TRUE(std::isfinite(d_x[i])) << i << ": x " << x[i] << " d_x " << d_x[i];
    }
  }
}

// gelu(+inf) = +inf; gelu(-inf) = -inf * 0 = NaN, as in the reference (and PyTorch).
TEST(UbInputs, GeluForwardOnNanAndInfinities) {
  const auto x = special_inputs();
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> out(x.size());       // (n)
  std::vector<double> out_ref(x.size());  // (n)
  const auto xd = test::cast_vector<double>(x);
  cpu::gelu_forward(out.data(), x.data(), n);
  ref::gelu_forward(out_ref.data(), xd.data(), n);
  EXPECT_TRUE(same_class(out, out_ref));
  EXPECT_EQ(out[2], kInf);

  std::vector<float> d_x(x.size(), 0.0f), d_out(x.size(), 1.0f);  // (n)
  cpu::gelu_backward(d_x.data(), x.data(), d_out.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(d_x[i])) << i;
    }
  }
}

// One row of V logits, finite except at `at`, where `value` goes; target t. Returns the fast
// loss after checking it against the reference's.
double cross_entropy_row(float value, int at, int t) {
  constexpr int V = 37;
  auto logits = test::random_vector<float>(V, 5, -3.0, 3.0);  // (1, V)
  logits[at] = value;
  const std::int32_t target = t;
  float lse = 0.0f;
  double lse_ref = 0.0;
  std::int64_t count = 0, count_ref = 0;
  const double loss = cpu::cross_entropy_forward(&lse, &count, logits.data(), &target, 1, V, V, -1);
  const auto ld = test::cast_vector<double>(logits);
  const double loss_ref = ref::cross_entropy_forward(&lse_ref, &count_ref, ld.data(), &target, 1, V, V, -1);
  EXPECT_TRUE(same_class({static_cast<float>(loss)}, {loss_ref})) << "logit " << value << " at " << at;
  return loss;
}

TEST(UbInputs, CrossEntropyForwardOnNanAndInfinities) {
  for (int at : {0, 1, 17, 36}) {  // first (the max's seed), vector body and tail
    SCOPED_TRACE("at " + std::to_string(at));
    EXPECT_TRUE(std::isnan(cross_entropy_row(kNan, at, (at + 3) % 37)));
    // A -inf logit away from the target drops out of the sum: a finite loss.
    EXPECT_TRUE(std::isfinite(cross_entropy_row(-kInf, at, (at + 3) % 37)));
    // The target at -inf: probability 0, loss +inf.
    EXPECT_EQ(cross_entropy_row(-kInf, at, at), std::numeric_limits<double>::infinity());
    // +inf - +inf in the log-sum-exp: NaN, as in the reference.
    EXPECT_TRUE(std::isnan(cross_entropy_row(kInf, at, (at + 3) % 37)));
  }
}

// The message of the llmcc::Error that f throws ("" and a failure when it throws nothing).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no llmcc::Error";
  return "";
}

TEST(UbInputs, Gpt2ConfigTooLargeIsAnError) {
  models::Gpt2Config wide = models::gpt2_preset("gpt2");
  wide.n_embd = 1 << 30;
  wide.n_head = 16;
  std::string what = error_of([&] { wide.validate(); });
  EXPECT_NE(what.find("[GPT-2 config]"), std::string::npos) << what;
  EXPECT_NE(what.find("n_embd (1073741824)"), std::string::npos) << what;
  EXPECT_NE(what.find("2^40"), std::string::npos) << what;
  what = error_of([&] { (void)wide.parameter_count(); });  // not a negative count
  EXPECT_NE(what.find("limit"), std::string::npos) << what;

  models::Gpt2Config deep = models::gpt2_preset("gpt2");
  deep.n_layer = 1 << 30;
  what = error_of([&] { deep.validate(); });
  EXPECT_NE(what.find("n_layer (1073741824)"), std::string::npos) << what;
  EXPECT_NE(what.find("2^40"), std::string::npos) << what;

  // Every int field at its maximum: still an error, not an overflow.
  models::Gpt2Config all_max;
  all_max.vocab_size = all_max.padded_vocab_size = all_max.max_seq_len = all_max.n_layer = all_max.n_embd =
      all_max.n_head = std::numeric_limits<int>::max();
  EXPECT_NE(error_of([&] { all_max.validate(); }).find("2^40"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)models::padded_vocab(std::numeric_limits<int>::max()); }).find("vocab_size"),
            std::string::npos);

  EXPECT_EQ(models::gpt2_preset("gpt2").parameter_count(), 124475904);  // llm.c's count with Vp 50304
}

TEST(UbInputs, LlamaConfigTooLargeIsAnError) {
  models::LlamaConfig wide = models::llama_preset("stories15m");
  wide.n_embd = 1 << 30;
  wide.n_head = wide.n_kv_head = 16;
  std::string what = error_of([&] { wide.validate(); });
  EXPECT_NE(what.find("[Llama config]"), std::string::npos) << what;
  EXPECT_NE(what.find("n_embd (1073741824)"), std::string::npos) << what;
  EXPECT_NE(what.find("2^40"), std::string::npos) << what;
  what = error_of([&] { (void)wide.parameter_count(); });
  EXPECT_NE(what.find("limit"), std::string::npos) << what;

  models::LlamaConfig deep = models::llama_preset("stories15m");
  deep.n_layer = 1 << 30;
  what = error_of([&] { deep.validate(); });
  EXPECT_NE(what.find("n_layer (1073741824)"), std::string::npos) << what;

  models::LlamaConfig wide_ffn = models::llama_preset("stories15m");
  wide_ffn.hidden_dim = std::numeric_limits<int>::max();
  what = error_of([&] { wide_ffn.validate(); });
  EXPECT_NE(what.find("hidden_dim (2147483647)"), std::string::npos) << what;

  EXPECT_NE(error_of([] { (void)models::llama_hidden_dim(1 << 30, 32); }).find("does not fit"), std::string::npos);
  EXPECT_NE(error_of([] { (void)models::llama_hidden_dim(288, 32, kNan); }).find("ffn_dim_multiplier"),
            std::string::npos);
  EXPECT_EQ(models::llama_hidden_dim(288, 32), 768);
}

// Sizes that pass the 2^40 limit but cannot fit in memory are refused with the size needed and
// the size available, before anything is allocated (not a bad_alloc, not a machine paging out).
TEST(UbInputs, WeightsThatCannotFitAreRefusedBeforeAllocating) {
  if (available_memory_bytes() == 0) GTEST_SKIP() << "this system does not report its memory";
  std::string what = error_of([] { check_memory_fits("probe", "a buffer", 1e18L); });
  EXPECT_NE(what.find("[probe] a buffer needs"), std::string::npos) << what;
  EXPECT_NE(what.find("GiB of memory is available"), std::string::npos) << what;
  EXPECT_NO_THROW(check_memory_fits("probe", "a buffer", 1024.0L));

  what = error_of([] { ParameterStore huge({{"w", Shape{std::int64_t{1} << 20, std::int64_t{1} << 19}}}); });
  EXPECT_NE(what.find("[parameters] 1 tensors of 549755813888 floats needs"), std::string::npos) << what;

  models::Gpt2Config deep = models::gpt2_preset("gpt2");
  deep.n_embd = 64;
  deep.n_head = 4;
  deep.n_layer = 1 << 24;  // 8.4e11 parameters: under 2^40, over any machine's memory
  what = error_of([&] { (void)models::make_gpt2(deep); });
  EXPECT_NE(what.find("[gpt2] the weights of GPT-2"), std::string::npos) << what;
  EXPECT_NE(what.find("GiB of memory is available"), std::string::npos) << what;

  models::LlamaConfig deep_llama = models::llama_preset("stories15m");
  deep_llama.n_layer = 1 << 19;  // 5.2e11 parameters
  what = error_of([&] { (void)models::make_llama(deep_llama); });
  EXPECT_NE(what.find("[llama] the weights of Llama"), std::string::npos) << what;
}

}  // namespace
}  // namespace llmcc
