// add: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract (Api).
#include "llmcc/ops/add.h"

#include "kernels/cpu/add.h"
#include "kernels/ref/add.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

TEST(AddKernel, ForwardAndBackwardMatchReference) {
  test::for_each_thread_count([](int) {
    for (int n : test::awkward_sizes()) {
      for (int n2 : {n, n * 197 + 5}) {  // also a size large enough to go parallel
        SCOPED_TRACE("n=" + std::to_string(n2));
        const auto a = test::random_vector<float>(n2, 1), b = test::random_vector<float>(n2, 2);
        const auto d_out = test::random_vector<float>(n2, 3);
        std::vector<float> out(n2), out_ref(n2);
        cpu::add_forward(out.data(), a.data(), b.data(), n2);
        ref::add_forward(out_ref.data(), a.data(), b.data(), n2);
        EXPECT_TRUE(all_close("out", out, out_ref, 0.0, 0.0));

        auto d_a = test::random_vector<float>(n2, 4), d_b = test::random_vector<float>(n2, 5);
        auto d_a_ref = d_a, d_b_ref = d_b;
        cpu::add_backward(d_a.data(), d_b.data(), d_out.data(), n2);
        ref::add_backward(d_a_ref.data(), d_b_ref.data(), d_out.data(), n2);
        EXPECT_TRUE(all_close("d_a", d_a, d_a_ref, 0.0, 0.0));
        EXPECT_TRUE(all_close("d_b", d_b, d_b_ref, 0.0, 0.0));
      }
    }
  });
}

TEST(AddGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int n = 37;
  auto a = test::random_vector<double>(n, 11), b = test::random_vector<double>(n, 12);
  const auto w = test::random_vector<double>(n, 13);  // adjoint of out
  auto loss = [&] {
    std::vector<double> out(n);
    ref::add_forward(out.data(), a.data(), b.data(), n);
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_a(n, 0.0), d_b(n, 0.0);
  ref::add_backward(d_a.data(), d_b.data(), w.data(), n);
  EXPECT_TRUE(test::fd_check(loss, {{"a", &a, &d_a}, {"b", &b, &d_b}}));
}

TEST(AddApi, ForwardAndPullbackAccumulateAndSkipNulls) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Shape s{2, 3, 5};
  Tensor a = test::tensor_from(arena, s, test::random_vector<float>(30, 1));
  Tensor b = test::tensor_from(arena, s, test::random_vector<float>(30, 2));
  Tensor out = a + b;
  ASSERT_EQ(out.shape(), s);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(out.f32()[i], a.f32()[i] + b.f32()[i]);

  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(30, 3));
  Tensor d_a = test::tensor_from(arena, s, std::vector<float>(30, 1.0f));
  add_pullback(a, b, out, d_out, &d_a, nullptr);  // accumulates into d_a, skips d_b
  for (int i = 0; i < 30; ++i) EXPECT_EQ(d_a.f32()[i], 1.0f + d_out.f32()[i]);
}

TEST(AddApi, RejectsMismatchedShapesAndMissingArena) {
  Arena arena(1 << 20);
  Tensor a = arena.zeros({2, 3}, "a"), b = arena.zeros({3, 2}, "b");
  EXPECT_TRUE(test::throws_error([&] { (void)add(a, a); }, {"[add]", "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  EXPECT_TRUE(test::throws_error([&] { (void)add(a, b); }, {"[add]", "b has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)add(a, Tensor()); }, {"[add]", "no storage"}));
  Tensor d_wrong = arena.zeros({6}, "d");
  EXPECT_TRUE(test::throws_error([&] { add_pullback(a, a, a, a, &d_wrong, nullptr); }, {"[add]", "d_a has shape (6)"}));
}

}  // namespace
}  // namespace llmcc
