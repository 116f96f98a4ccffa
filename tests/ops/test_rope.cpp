// rope: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation, the Llama convention by hand and the pullback contract (Api).
#include "llmcc/ops/rope.h"

#include "kernels/cpu/rope.h"
#include "kernels/ref/rope.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

constexpr float kTheta = 10000.0f;  // Llama 2

// Llama 3.2's frequencies (config.json: rope_theta 500000, rope_scaling llama3 factor 32, low 1,
// high 4, original 8192).
RopeConfig llama32_rope() {
  RopeConfig r{500000.0f, {}};
  r.scaling.type = RopeScaling::Type::Llama3;
  r.scaling.factor = 32.0f;
  r.scaling.low_freq_factor = 1.0f;
  r.scaling.high_freq_factor = 4.0f;
  r.scaling.original_max_position_embeddings = 8192;
  return r;
}

struct ModeGuard {  // restores the kernel mode a test changed
  KernelMode before = kernel_mode();
  ~ModeGuard() { set_kernel_mode(before); }
};

// Fast forward and backward against the double reference for one shape.
void check_shape(Arena& arena, int B, int T, int NH, int HS, int pos_offset,
                 const RopeConfig& cfg = RopeConfig{kTheta, {}}) {
  SCOPED_TRACE(std::string(cfg.scaling.type_name()) + " " + "B=" + std::to_string(B) + " T=" + std::to_string(T) +
               " NH=" + std::to_string(NH) + " HS=" + std::to_string(HS) + " pos_offset=" + std::to_string(pos_offset));
  arena.reset();
  const std::size_t n = static_cast<std::size_t>(B) * T * NH * HS;
  const auto x = test::random_vector<float>(n, 1), d_out = test::random_vector<float>(n, 2);  // (B, T, C)
  std::vector<float> out(n);                                                                  // (B, T, C)
  cpu::rope_forward(out.data(), x.data(), B, T, NH, HS, cfg, pos_offset);
  std::vector<double> out_ref(n);
  ref::rope_forward(out_ref.data(), test::cast_vector<double>(x).data(), B, T, NH, HS, cfg, pos_offset);
  EXPECT_TRUE(all_close("out", out, out_ref, 1e-6, 1e-6));

  auto d_x = test::random_vector<float>(n, 3);  // pre-filled: both kernels accumulate
  auto d_x_ref = test::cast_vector<double>(d_x);
  cpu::rope_backward(d_x.data(), d_out.data(), B, T, NH, HS, cfg, pos_offset);
  ref::rope_backward(d_x_ref.data(), test::cast_vector<double>(d_out).data(), B, T, NH, HS, cfg, pos_offset);
  EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, 1e-6, 1e-6));
}

TEST(RopeKernel, ForwardAndBackwardMatchDoubleReference) {
  Arena arena(1 << 22);  // the fast kernel's cos/sin tables
  ArenaScope scope(arena);
  test::for_each_thread_count([&](int) {
    for (int pos_offset : {0, 1000}) {
      for (int T : test::awkward_sizes()) check_shape(arena, 2, T, 3, 64, pos_offset);
      for (int half : test::awkward_sizes()) check_shape(arena, 2, 7, 3, 2 * half, pos_offset);
      for (int NH : test::awkward_sizes()) check_shape(arena, 1, 3, NH, 6, pos_offset);
      check_shape(arena, 2, 9, 3, 64, pos_offset, llama32_rope());  // every band of the scaling
    }
  });
}

TEST(RopeGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int B = 2, T = 3, NH = 2, HS = 6, pos_offset = 5;
  const std::size_t n = static_cast<std::size_t>(B) * T * NH * HS;
  auto x = test::random_vector<double>(n, 11);          // (B, T, C)
  const auto wts = test::random_vector<double>(n, 12);  // adjoint of out (B, T, C)
  auto loss = [&] {
    std::vector<double> out(n);
    ref::rope_forward(out.data(), x.data(), B, T, NH, HS, RopeConfig{100.0f, {}}, pos_offset);
    return test::weighted_sum(out, wts);
  };
  std::vector<double> d_x(n, 0.0);
  ref::rope_backward(d_x.data(), wts.data(), B, T, NH, HS, RopeConfig{100.0f, {}}, pos_offset);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}}));
}

TEST(RopeApi, FollowsTheLlamaConventionInBothModes) {
  ModeGuard guard;
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const int B = 1, T = 4, NH = 2, HS = 8, C = NH * HS, pos_offset = 3;
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    set_kernel_mode(mode);
    // A unit vector at x[0, t=2, head 1, element 2 * i] with i = 1 becomes
    // (cos a, sin a) in elements (2i, 2i+1), a = (pos_offset + 2) * theta^(-2i/HS).
    Tensor x = arena.zeros({B, T, C}, "x");  // (B, T, C)
    const int at = 2 * C + 1 * HS + 2;
    x.f32()[at] = 1.0f;
    Tensor out = rope(x, NH, kTheta, pos_offset);
    const double a = (pos_offset + 2) * std::pow(10000.0, -2.0 / 8.0);
    for (int k = 0; k < B * T * C; ++k) {
      const double expected = k == at ? std::cos(a) : k == at + 1 ? std::sin(a) : 0.0;
      EXPECT_NEAR(out.f32()[k], expected, 1e-6) << "element " << k;
    }
    // Pair 0 at position pos_offset rotates by pos_offset radians exactly (theta^0 = 1).
    x.f32()[at] = 0.0f;
    x.f32()[1] = 1.0f;  // t = 0, head 0, element 1: (0, 1) -> (-sin p, cos p)
    out = rope(x, NH, kTheta, pos_offset);
    EXPECT_NEAR(out.f32()[0], -std::sin(3.0), 1e-6);
    EXPECT_NEAR(out.f32()[1], std::cos(3.0), 1e-6);
  }
}

TEST(RopeApi, PullbackIsTheInverseAccumulatesSkipsNullsAndModesAgree) {
  ModeGuard guard;
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const int B = 2, T = 5, NH = 3, HS = 4;
  const Shape s{B, T, NH * HS};
  const int n = B * T * NH * HS;
  Tensor x = test::tensor_from(arena, s, test::random_vector<float>(n, 1));      // (B, T, C)
  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(n, 2));  // (B, T, C)
  std::vector<float> outs[2], d_xs[2];
  const KernelMode modes[2] = {KernelMode::Reference, KernelMode::Fast};
  for (int k = 0; k < 2; ++k) {
    set_kernel_mode(modes[k]);
    Tensor out = rope(x, NH, kTheta, 7);
    // Rotating back the output (d_out = out into a zero d_x) gives x again.
    Tensor back = arena.zeros(s, "back");
    rope_pullback(x, NH, kTheta, 7, out, out, &back);
    EXPECT_TRUE(all_close("inverse rotation of out", test::to_vector(back), test::to_vector(x), 1e-6, 1e-6));

    Tensor d_x = test::tensor_from(arena, s, std::vector<float>(n, 1.0f));  // pre-filled with ones
    Tensor fresh = arena.zeros(s, "fresh");
    rope_pullback(x, NH, kTheta, 7, out, d_out, &d_x);
    rope_pullback(x, NH, kTheta, 7, out, d_out, &fresh);
    rope_pullback(x, NH, kTheta, 7, out, d_out, nullptr);  // skipped, no crash
    for (int i = 0; i < n; ++i) EXPECT_EQ(d_x.f32()[i], 1.0f + fresh.f32()[i]) << "element " << i;
    outs[k] = test::to_vector(out);
    d_xs[k] = test::to_vector(fresh);
  }
  EXPECT_TRUE(all_close("out fast vs ref", outs[1], outs[0], 1e-6, 1e-6));
  EXPECT_TRUE(all_close("d_x fast vs ref", d_xs[1], d_xs[0], 1e-6, 1e-6));
}

// Llama 3 frequencies against values computed in double from the formula of transformers'
// _compute_llama3_parameters (modeling_rope_utils.py), written out in llmcc/ops/rope.h; in
// transformers 5.23's own float32 computation the same values agree to 2.2e-7 relative.
TEST(RopeApi, Llama3ScalingFrequenciesFollowTheFormula) {
  struct Case {
    int i;
    double inv_freq;
  };
  // Llama 3.2 (HS 64): pairs 0..14 kept, 15..17 interpolated, 18.. divided by 32.
  const Case llama32[] = {{0, 1.0},
                          {1, 0.6636012376960885},
                          {14, 0.003211445994752591},
                          {15, 0.001290547928209264},
                          {16, 0.00042955679655936815},
                          {17, 9.70828780262767e-05},
                          {18, 1.9461638184831125e-05},
                          {31, 9.41830672543491e-08}};
  for (const Case& c : llama32)
    EXPECT_NEAR(rope_inv_freq(llama32_rope(), c.i, 64), c.inv_freq, 1e-13 * c.inv_freq) << "pair " << c.i;
  // Other factors (theta 10000, HS 16, factor 8, low 2, high 8, original 4096): 0..3 kept, 4..5
  // interpolated, 6..7 divided by 8.
  RopeConfig other{10000.0f, {}};
  other.scaling = {RopeScaling::Type::Llama3, 8.0f, 2.0f, 8.0f, 4096};
  const double expected[8] = {
      1.0,      0.31622776601683794,  0.1, 0.03162277660168379, 0.007840188600689215, 0.0004236392500408582,
      0.000125, 3.952847075210474e-05};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(rope_inv_freq(other, i, 16), expected[i], 1e-13 * expected[i]) << i;
  // No scaling: theta^(-2i/HS).
  EXPECT_DOUBLE_EQ(rope_inv_freq(RopeConfig{500000.0f, {}}, 18, 64), std::pow(500000.0, -36.0 / 64.0));
  // The op rotates by position * that frequency: pair 18 of a unit vector at position 1000.
  ModeGuard guard;
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    set_kernel_mode(mode);
    Tensor x = arena.zeros({1, 1, 64}, "x");  // (B, T, C), one head
    x.f32()[36] = 1.0f;
    const Tensor out = rope(x, 1, llama32_rope(), 1000);
    EXPECT_NEAR(out.f32()[36], std::cos(1000 * 1.9461638184831125e-05), 1e-7);
    EXPECT_NEAR(out.f32()[37], std::sin(1000 * 1.9461638184831125e-05), 1e-7);
  }
}

TEST(RopeApi, RopeTypesByNameAndBadScalingAreClearErrors) {
  EXPECT_EQ(RopeScaling::type_from_name("llama3", "cfg"), RopeScaling::Type::Llama3);
  EXPECT_EQ(RopeScaling::type_from_name("default", "cfg"), RopeScaling::Type::None);
  EXPECT_TRUE(test::throws_error([] { (void)RopeScaling::type_from_name("yarn", "cfg"); },
                                 {"[cfg]", "rope_type 'yarn' is not supported", "'llama3'"}));
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  Tensor x = arena.zeros({1, 2, 8}, "x");
  RopeConfig bad = llama32_rope();
  bad.scaling.factor = 0.5f;
  EXPECT_TRUE(test::throws_error([&] { (void)rope(x, 1, bad, 0); }, {"[rope]", "factor is 0.5", ">= 1"}));
  bad = llama32_rope();
  bad.scaling.high_freq_factor = 1.0f;
  EXPECT_TRUE(test::throws_error([&] { (void)rope(x, 1, bad, 0); }, {"[rope]", "high_freq_factor", "> low"}));
  bad = llama32_rope();
  bad.scaling.original_max_position_embeddings = 0;
  EXPECT_TRUE(test::throws_error([&] { (void)rope(x, 1, bad, 0); }, {"[rope]", "original_max_position_embeddings"}));
}

TEST(RopeApi, RejectsBadShapesBadConfigAndMissingArena) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({2, 3, 12}, "x");  // (B, T, C), C = 12
  EXPECT_TRUE(test::throws_error([&] { (void)rope(x, 2, kTheta, 0); }, {"[rope]", "ArenaScope"}));
  ArenaScope scope(arena);
  Tensor x2 = arena.zeros({6, 12}, "x2");
  EXPECT_TRUE(test::throws_error([&] { (void)rope(x2, 2, kTheta, 0); },
                                 {"[rope]", "x has shape (6, 12)", "expected 3 dims (B, T, C)"}));
  EXPECT_TRUE(
      test::throws_error([&] { (void)rope(x, 5, kTheta, 0); }, {"[rope]", "C = 12 is not divisible by n_head = 5"}));
  EXPECT_TRUE(
      test::throws_error([&] { (void)rope(x, 4, kTheta, 0); }, {"[rope]", "HS = C / n_head = 3 is odd", "even"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rope(x, 0, kTheta, 0); }, {"[rope]", "n_head is 0", ">= 1"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rope(x, -2, kTheta, 0); }, {"[rope]", "n_head is -2"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rope(x, 2, 0.0f, 0); }, {"[rope]", "theta is 0", "> 0"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rope(x, 2, INFINITY, 0); }, {"[rope]", "theta is inf"}));
  EXPECT_TRUE(
      test::throws_error([&] { (void)rope(x, 2, kTheta, -1); }, {"[rope]", "pos_offset is -1", ">= 0", "KV cache"}));
  EXPECT_TRUE(test::throws_error([&] { (void)rope(Tensor(), 2, kTheta, 0); }, {"[rope]", "x has no storage"}));

  Tensor out = rope(x, 2, kTheta, 0);
  Tensor d_bad = arena.zeros({2, 12, 3}, "d");
  EXPECT_TRUE(test::throws_error([&] { rope_pullback(x, 2, kTheta, 0, out, d_bad, nullptr); },
                                 {"[rope]", "d_out has shape (2, 12, 3)", "expected (2, 3, 12)"}));
  EXPECT_TRUE(test::throws_error([&] { rope_pullback(x, 2, kTheta, 0, out, out, &d_bad); },
                                 {"[rope]", "d_x has shape (2, 12, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { rope_pullback(x, 4, kTheta, 0, out, out, nullptr); }, {"[rope]", "is odd"}));
}

}  // namespace
}  // namespace llmcc
