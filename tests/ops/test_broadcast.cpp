// add, sub and mul with a broadcast operand (one element, a row vector, a column vector): fast
// kernels vs reference (Kernel), reference backward vs finite differences (Grad), the front ends'
// shape rule, both operand orders, accumulation and errors (Api).
#include "kernels/cpu/broadcast.h"

#include "kernels/ref/broadcast.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/mul.h"
#include "llmcc/ops/sub.h"
#include "test_support.h"

namespace llmcc {
namespace {

using cpu::BinaryKind;
using cpu::Broadcast;
using cpu::BroadcastAxis;
using test::all_close;

constexpr BinaryKind kKinds[] = {BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul};
constexpr BroadcastAxis kAxes[] = {BroadcastAxis::Scalar, BroadcastAxis::Row, BroadcastAxis::Column};

const char* name(BinaryKind k) { return k == BinaryKind::Add ? "add" : k == BinaryKind::Sub ? "sub" : "mul"; }
const char* name(BroadcastAxis a) {
  return a == BroadcastAxis::Scalar ? "scalar" : a == BroadcastAxis::Row ? "row" : "column";
}
std::int64_t small_count(const Broadcast& b) {
  return b.axis == BroadcastAxis::Scalar ? 1 : b.axis == BroadcastAxis::Row ? b.cols : b.rows;
}

TEST(BroadcastKernel, ForwardAndBackwardMatchReference) {
  test::for_each_thread_count([](int) {
    for (BinaryKind kind : kKinds)
      for (BroadcastAxis axis : kAxes)
        for (int rows : {1, 3, 17, 130})
          for (int cols : {1, 7, 16, 33, 257}) {  // 130 x 257 goes parallel, in two column blocks
            const Broadcast b{axis, rows, cols};
            SCOPED_TRACE(std::string(name(kind)) + " " + name(axis) + " " + std::to_string(rows) + "x" +
                         std::to_string(cols));
            const int n = rows * cols, m = static_cast<int>(small_count(b));
            const auto full = test::random_vector<float>(n, 1), small = test::random_vector<float>(m, 2);
            const auto d_out = test::random_vector<float>(n, 3);
            std::vector<float> out(n), out_ref(n);
            cpu::broadcast_forward(kind, out.data(), full.data(), small.data(), b);
            ref::broadcast_forward(kind, out_ref.data(), full.data(), small.data(), b);
            EXPECT_TRUE(all_close("out", out, out_ref, 0.0, 0.0));
            for (bool overwrite : {false, true}) {
              SCOPED_TRACE(overwrite ? "overwrite" : "accumulate");
              const auto start_full = test::random_vector<float>(n, 4);
              const auto start_small = test::random_vector<float>(m, 5);
              auto d_full = start_full, d_small = start_small;
              auto d_full_ref = overwrite ? std::vector<float>(n, 0.0f) : start_full;
              auto d_small_ref = start_small;
              cpu::broadcast_backward(kind, d_full.data(), d_small.data(), full.data(), small.data(), d_out.data(), b,
                                      overwrite);
              ref::broadcast_backward(kind, d_full_ref.data(), d_small_ref.data(), full.data(), small.data(),
                                      d_out.data(), b);
              // mul's d_full += d_out * s may be one fused multiply-add in one build and not the
              // other: a rounding apart. add's and sub's are exact.
              const double tol = kind == BinaryKind::Mul ? 1e-6 : 0.0;
              EXPECT_TRUE(all_close("d_full", d_full, d_full_ref, tol, tol));
              // Both sum in double; only the order of those additions may differ.
              EXPECT_TRUE(all_close("d_small", d_small, d_small_ref, 1e-6, 1e-6));
            }
            // Null adjoints are skipped.
            auto d_small = test::random_vector<float>(m, 6);
            const auto before = d_small;
            cpu::broadcast_backward(kind, nullptr, nullptr, full.data(), small.data(), d_out.data(), b);
            cpu::broadcast_backward(kind, nullptr, d_small.data(), full.data(), small.data(), d_out.data(), b);
            EXPECT_NE(d_small, before);
          }
  });
}

TEST(BroadcastKernel, SumsAreTheSameOnEveryThreadCount) {
  for (BroadcastAxis axis : kAxes) {
    const Broadcast b{axis, 1031, 517};  // large enough to go parallel, several column blocks
    const int n = 1031 * 517, m = static_cast<int>(small_count(b));
    const auto full = test::random_vector<float>(n, 7), d_out = test::random_vector<float>(n, 8);
    const auto small = test::random_vector<float>(m, 9);
    std::vector<std::vector<float>> results;
    test::for_each_thread_count([&](int) {
      std::vector<float> d_small(m, 0.0f);
      cpu::broadcast_backward(BinaryKind::Mul, nullptr, d_small.data(), full.data(), small.data(), d_out.data(), b);
      results.push_back(d_small);
    });
    for (const auto& r : results) EXPECT_EQ(r, results.front()) << name(axis);
  }
}

TEST(BroadcastGrad, ReferenceBackwardMatchesFiniteDifferences) {
  for (BinaryKind kind : kKinds)
    for (BroadcastAxis axis : kAxes) {
      SCOPED_TRACE(std::string(name(kind)) + " " + name(axis));
      const Broadcast b{axis, 5, 7};
      const int n = 35, m = static_cast<int>(small_count(b));
      auto full = test::random_vector<double>(n, 11), small = test::random_vector<double>(m, 12);
      const auto w = test::random_vector<double>(n, 13);  // adjoint of out
      auto loss = [&] {
        std::vector<double> out(n);
        ref::broadcast_forward(kind, out.data(), full.data(), small.data(), b);
        return test::weighted_sum(out, w);
      };
      std::vector<double> d_full(n, 0.0), d_small(m, 0.0);
      ref::broadcast_backward(kind, d_full.data(), d_small.data(), full.data(), small.data(), w.data(), b);
      EXPECT_TRUE(test::fd_check(loss, {{"full", &full, &d_full}, {"small", &small, &d_small}}));
    }
}

// Values of a broadcast small operand at element i of an (R, C) full one.
float at(const Tensor& small, BroadcastAxis axis, int i, int C) {
  return small.f32()[axis == BroadcastAxis::Scalar ? 0 : axis == BroadcastAxis::Row ? i % C : i / C];
}

TEST(BroadcastApi, EveryFormOnEitherSideWithItsPullback) {
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    test::KernelModeScope kernels(mode);
    Arena arena(1 << 22);
    ArenaScope scope(arena);
    const int R = 6, C = 5;  // x is (2, 3, 5): six rows of five
    const Shape full_shape{2, 3, C};
    Tensor x = test::tensor_from(arena, full_shape, test::random_vector<float>(R * C, 1));
    Tensor d_out = test::tensor_from(arena, full_shape, test::random_vector<float>(R * C, 2));
    const std::pair<Shape, BroadcastAxis> forms[] = {
        {Shape{1}, BroadcastAxis::Scalar},    {Shape{1, 1, 1}, BroadcastAxis::Scalar},
        {Shape{C}, BroadcastAxis::Row},       {Shape{1, C}, BroadcastAxis::Row},
        {Shape{1, 1, C}, BroadcastAxis::Row}, {Shape{2, 3, 1}, BroadcastAxis::Column}};
    for (const auto& [shape, axis] : forms) {
      SCOPED_TRACE(shape.str());
      Tensor v = test::tensor_from(arena, shape, test::random_vector<float>(shape.numel(), 3));
      const Tensor outs[] = {x + v, v + x, x - v, x * v, v * x};
      for (const Tensor& o : outs) ASSERT_EQ(o.shape(), full_shape);
      for (int i = 0; i < R * C; ++i) {
        const float s = at(v, axis, i, C);
        EXPECT_EQ(outs[0].f32()[i], x.f32()[i] + s);
        EXPECT_EQ(outs[1].f32()[i], x.f32()[i] + s);
        EXPECT_EQ(outs[2].f32()[i], x.f32()[i] - s);
        EXPECT_EQ(outs[3].f32()[i], x.f32()[i] * s);
        EXPECT_EQ(outs[4].f32()[i], x.f32()[i] * s);
      }
      // Pullbacks: the small operand's adjoint sums what its values reached, with v on either
      // side; adjoints accumulate onto what they held.
      for (int which = 0; which < 4; ++which) {
        Tensor d_x = test::tensor_from(arena, full_shape, std::vector<float>(R * C, 1.0f));
        Tensor d_v = test::tensor_from(arena, shape, std::vector<float>(shape.numel(), 1.0f));
        if (which == 0) add_pullback(x, v, outs[0], d_out, &d_x, &d_v);
        if (which == 1) add_pullback(v, x, outs[1], d_out, &d_v, &d_x);
        if (which == 2) sub_pullback(x, v, outs[2], d_out, &d_x, &d_v);
        if (which == 3) mul_pullback(v, x, outs[4], d_out, &d_v, &d_x);
        std::vector<double> want(static_cast<std::size_t>(shape.numel()), 1.0);
        for (int i = 0; i < R * C; ++i) {
          const double g = d_out.f32()[i];
          const std::size_t j = axis == BroadcastAxis::Scalar ? 0 : axis == BroadcastAxis::Row ? i % C : i / C;
          want[j] += which == 2 ? -g : which == 3 ? g * x.f32()[i] : g;
          const float want_dx = 1.0f + (which == 3 ? d_out.f32()[i] * at(v, axis, i, C) : d_out.f32()[i]);
          EXPECT_FLOAT_EQ(d_x.f32()[i], want_dx) << which << " at " << i;  // mul's may be one fused op
        }
        for (std::size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(d_v.f32()[j], want[j], 1e-5) << which << " at " << j;
      }
    }
  }
}

// Of two one-element operands the one with more axes is the full one, as it is when its sizes
// are larger: a (1) gain times a (B, T, C) activation stays (B, T, C) at B = T = C = 1.
TEST(BroadcastApi, OneElementOperandsTakeTheShapeWithMoreAxes) {
  for (KernelMode mode : {KernelMode::Reference, KernelMode::Fast}) {
    test::KernelModeScope kernels(mode);
    Arena arena(1 << 20);
    ArenaScope scope(arena);
    const Shape shapes[] = {Shape{1}, Shape{1, 1}, Shape{1, 1, 1}};
    for (const Shape& sa : shapes)
      for (const Shape& sb : shapes) {
        if (sa == sb) continue;
        SCOPED_TRACE("a " + sa.str() + ", b " + sb.str());
        const Shape& want = sa.ndim() >= sb.ndim() ? sa : sb;
        const float av = 1.5f, bv = -2.25f, g = 0.5f;
        Tensor a = test::tensor_from(arena, sa, {av}), b = test::tensor_from(arena, sb, {bv});
        Tensor d_out = test::tensor_from(arena, want, {g});
        const Tensor sum = a + b, product = a * b;
        ASSERT_EQ(sum.shape().str(), want.str());
        ASSERT_EQ(product.shape().str(), want.str());
        EXPECT_EQ(sum.f32()[0], av + bv);
        EXPECT_EQ(product.f32()[0], av * bv);
        // Pullbacks accumulate onto adjoints holding 1.
        Tensor d_a = test::tensor_from(arena, sa, {1.0f}), d_b = test::tensor_from(arena, sb, {1.0f});
        add_pullback(a, b, sum, d_out, &d_a, &d_b);
        EXPECT_EQ(d_a.f32()[0], 1.0f + g);
        EXPECT_EQ(d_b.f32()[0], 1.0f + g);
        d_a.f32()[0] = d_b.f32()[0] = 1.0f;
        mul_pullback(a, b, product, d_out, &d_a, &d_b);
        EXPECT_FLOAT_EQ(d_a.f32()[0], 1.0f + g * bv);
        EXPECT_FLOAT_EQ(d_b.f32()[0], 1.0f + g * av);
        // sub broadcasts only its right operand: with fewer axes, a would be the broadcast one.
        if (sa.ndim() < sb.ndim()) {
          const std::string a_is = "a has shape " + sa.str(), fewer = "fewer axes than b's " + sb.str();
          EXPECT_TRUE(test::throws_error([&] { (void)(a - b); }, {"[sub]", a_is.c_str(), fewer.c_str(), "-(b - a)"}));
          continue;
        }
        const Tensor difference = a - b;
        ASSERT_EQ(difference.shape().str(), want.str());
        EXPECT_EQ(difference.f32()[0], av - bv);
        d_a.f32()[0] = d_b.f32()[0] = 1.0f;
        sub_pullback(a, b, difference, d_out, &d_a, &d_b);
        EXPECT_EQ(d_a.f32()[0], 1.0f + g);
        EXPECT_EQ(d_b.f32()[0], 1.0f - g);
      }
  }
}

TEST(BroadcastApi, ShapesThatDoNotBroadcastAreClearErrors) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  Tensor x = arena.zeros({2, 3}, "x"), wrong = arena.zeros({2}, "w"), col3 = arena.zeros({3, 1}, "c");
  Tensor row = arena.zeros({3}, "r");
  EXPECT_TRUE(test::throws_error([&] { (void)(x + wrong); }, {"[add]", "b has shape (2)", "expected (2, 3)",
                                                              "a row (3), a column (2, 1) or one "
                                                              "element"}));
  EXPECT_TRUE(test::throws_error([&] { (void)(x * col3); }, {"[mul]", "b has shape (3, 1)", "a column (2, 1)"}));
  // sub broadcasts only its right operand: row - x is written -(x - row).
  EXPECT_TRUE(test::throws_error([&] { (void)(row - x); }, {"[sub]", "b has shape (2, 3)", "expected (3)"}));
  Tensor d_wrong = arena.zeros({2}, "d");
  Tensor out = x + row;
  EXPECT_TRUE(test::throws_error([&] { add_pullback(x, row, out, x, nullptr, &d_wrong); },
                                 {"[add]", "d_b has shape (2)", "expected (3)"}));
  EXPECT_TRUE(test::throws_error([&] { add_pullback(row, x, out, row, nullptr, nullptr); },
                                 {"[add]", "d_out has shape (3)", "expected (2, 3)"}));
}

}  // namespace
}  // namespace llmcc
