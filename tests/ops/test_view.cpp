// view: the pullback's kernels are add's (tested in test_add.cpp); here the block arithmetic
// against a scalar reference (Kernel), the pullback against finite differences (Grad), and the
// front end: sharing storage, reshape and slices, pending zeros, bad blocks (Api).
#include "llmcc/ops/view.h"

#include "kernels/ref/add.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

// Sets the kernel mode for a scope and restores the previous one.
TEST(ViewKernel, PullbackAddsIntoTheBlockOnlyInBothModes) {
  Arena arena(1 << 24);
  ArenaScope scope(arena);
  test::for_each_thread_count([&](int) {
    for (int n : test::awkward_sizes()) {
      for (int n2 : {n, n * 197 + 5}) {  // also a block large enough to go parallel
        for (const std::int64_t offset : {std::int64_t{0}, std::int64_t{3}}) {
          SCOPED_TRACE("n=" + std::to_string(n2) + " offset=" + std::to_string(offset));
          const std::int64_t N = n2 + offset + 5;  // x: (N), the block (n2) inside it
          Tensor x = test::tensor_from(arena, {N}, test::random_vector<float>(N, 1));
          Tensor d_out = test::tensor_from(arena, {n2}, test::random_vector<float>(n2, 2));
          const auto d_x0 = test::random_vector<float>(N, 3);  // pre-filled: the pullback adds
          std::vector<float> expected = d_x0;
          for (int i = 0; i < n2; ++i) expected[offset + i] += d_out.f32()[i];
          for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
            test::KernelModeScope m(mode);
            Tensor d_x = test::tensor_from(arena, {N}, d_x0);
            view_pullback(x, {n2}, offset, view(x, {n2}, offset), d_out, &d_x);
            EXPECT_TRUE(all_close("d_x", test::to_vector(d_x), expected, 0.0, 0.0));
          }
        }
      }
    }
  });
}

TEST(ViewGrad, ReferenceBackwardMatchesFiniteDifferences) {
  // In double, as the op computes: the forward is x's elements [offset, offset + n) (pointer
  // arithmetic), the backward ref::add_backward on that block of d_x. loss = sum_i w_i out_i for
  // a (2, 3) view at offset 5 of x (4, 3, 2): the block's elements get w, the others 0.
  const std::int64_t N = 24, n = 6, offset = 5;
  auto x = test::random_vector<double>(N, 11);        // (4, 3, 2)
  const auto w = test::random_vector<double>(n, 12);  // (2, 3) adjoint of out
  auto loss = [&] {
    const std::vector<double> out(x.begin() + offset, x.begin() + offset + n);  // (2, 3)
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_x(N, 0.0);
  ref::add_backward(d_x.data() + offset, static_cast<double*>(nullptr), w.data(), n);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}}));
}

TEST(ViewApi, SharesStorageForReshapesAndSlices) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  Tensor x = test::tensor_from(arena, {3, 2, 4}, test::random_vector<float>(24, 1));  // (3, 2, 4)
  Tensor flat = view(x, {3, 8}, 0);  // (3, 8): each row's two 4-vectors concatenated
  EXPECT_EQ(flat.shape(), (Shape{3, 8}));
  EXPECT_EQ(flat.f32(), x.f32());
  Tensor x1 = view(x, {2, 4}, 8);  // (2, 4) = x[1]
  EXPECT_EQ(x1.f32(), x.f32() + 8);
  EXPECT_EQ(x1.f32()[5], x.f32()[1 * 8 + 1 * 4 + 1]);
}

TEST(ViewApi, PullbackTakesPendingZerosAndSkipsNull) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  Tensor x = test::tensor_from(arena, {3, 4}, test::random_vector<float>(12, 1));  // (3, 4)
  Tensor d_out = test::tensor_from(arena, {4}, test::random_vector<float>(4, 2));  // (4) = d x[1]
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    test::KernelModeScope m(mode);
    Tensor d_x = test::tensor_from(arena, {3, 4}, std::vector<float>(12, 7.0f));  // garbage...
    d_x.mark_zero_pending();                                                      // ...read as 0
    view_pullback(x, {4}, 4, view(x, {4}, 4), d_out, &d_x);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(d_x.f32()[i], i >= 4 && i < 8 ? d_out.f32()[i - 4] : 0.0f) << i;
  }
  view_pullback(x, {4}, 4, view(x, {4}, 4), d_out, nullptr);  // inactive: nothing to do
}

TEST(ViewApi, RejectsBadBlocks) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  Tensor x = arena.zeros({3, 4}, "x"), d = arena.zeros({4}, "d");
  EXPECT_TRUE(test::throws_error([&] { (void)view(Tensor(), {4}, 0); }, {"[view]", "x has no storage"}));
  EXPECT_TRUE(test::throws_error([&] { (void)view(x, {5, 3}, 0); },
                                 {"[view]", "offset 0 + 15 elements of shape (5, 3)", "outside x (3, 4)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)view(x, {4}, 9); }, {"[view]", "offset 9", "expected 0 <= offset <= 8"}));
  EXPECT_TRUE(test::throws_error([&] { (void)view(x, {4}, -1); }, {"[view]", "offset -1"}));
  EXPECT_TRUE(test::throws_error([&] { (void)view(x, Shape{}, 0); }, {"[view]", "has no elements"}));
  EXPECT_TRUE(test::throws_error([&] { view_pullback(x, {2, 2}, 0, x, d, nullptr); },
                                 {"[view]", "d_out has shape (4), expected (2, 2)"}));
  EXPECT_TRUE(test::throws_error([&] { view_pullback(x, {4}, 0, d, d, &d); },
                                 {"[view]", "d_x has shape (4), expected (3, 4)"}));
}

}  // namespace
}  // namespace llmcc
