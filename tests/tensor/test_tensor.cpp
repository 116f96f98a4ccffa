#include "llmcc/tensor.h"

#include "llmcc/parameters.h"
#include "test_support.h"

namespace llmcc {
namespace {

TEST(Shape, IndexingAndPrinting) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.ndim(), 3);
  EXPECT_EQ(s[0], 2);
  EXPECT_EQ(s[-1], 4);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.str(), "(2, 3, 4)");
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_TRUE(test::throws_error([] { Shape bad{1, 2, 3, 4, 5}; }, {"[shape]", "at most 4"}));
  EXPECT_TRUE(test::throws_error([] { Shape bad{2, -1}; }, {"[shape]", "negative"}));
}

TEST(Tensor, IsAHandleThatNeverCopiesData) {
  float data[6] = {0, 1, 2, 3, 4, 5};
  Tensor t(data, {2, 3});
  Tensor u = t;  // copy of the handle
  u.f32()[0] = 42.0f;
  EXPECT_EQ(data[0], 42.0f);
  EXPECT_EQ(t.raw(), u.raw());
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(Tensor(nullptr, {4}, DType::BF16).nbytes(), 8u);
  EXPECT_FALSE(Tensor().defined());
}

struct TwoLayers {
  Tensor w1{nullptr, {3, 5}}, b1{nullptr, {3}}, w2{nullptr, {17}};
  template <class F>
  void for_each_parameter(F&& f) {
    f("l1.weight", w1);
    f("l1.bias", b1);
    f("l2.weight", w2);
  }
};

TEST(ParameterStore, OneContiguousAlignedBufferInVisitingOrder) {
  TwoLayers m;
  ParameterStore store = bind_parameters(m);
  EXPECT_EQ(store.count(), 3u);
  EXPECT_EQ(store.name(1), "l1.bias");
  EXPECT_EQ(store.parameter_count(), 15 + 3 + 17);
  EXPECT_EQ(m.w1.raw(), store.data());
  EXPECT_LT(m.w1.raw(), m.b1.raw());
  EXPECT_LT(m.b1.raw(), m.w2.raw());
  for (std::size_t i = 0; i < store.count(); ++i) EXPECT_EQ(store.offset(i) % 16, 0u);
  m.w2.f32()[16] = 3.0f;
  store.zero();
  EXPECT_EQ(m.w2.f32()[16], 0.0f);
  ParameterStore grads = store.like();
  EXPECT_EQ(grads.size(), store.size());
  EXPECT_EQ(grads.offset(2), store.offset(2));
  EXPECT_NE(grads.data(), store.data());
}

TEST(ParameterStore, RejectsUndeclaredShapes) {
  EXPECT_TRUE(test::throws_error([] { ParameterStore s({{"a", Shape{2}}, {"b", Shape{}}}); },
                                 {"[parameters]", "parameter 1 ('b')", "empty shape"}));
}

}  // namespace
}  // namespace llmcc
