#include "llmcc/arena.h"

#include <cstdint>

#include "test_support.h"

namespace llmcc {
namespace {

TEST(Arena, AllocatesAlignedAndTracksHighWater) {
  Arena arena(4096);
  void* p = arena.allocate(10, "a");
  void* q = arena.allocate(100, "b");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % Arena::kAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % Arena::kAlignment, 0u);
  EXPECT_EQ(arena.used(), 64u + 128u);
  arena.reset();
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_EQ(arena.high_water(), 192u);
  EXPECT_EQ(arena.allocate(10, "c"), p);  // reuse after reset
}

TEST(Arena, OverflowIsAClearError) {
  Arena arena(1024);
  arena.allocate(1000, "first");
  EXPECT_TRUE(test::throws_error([&] { arena.allocate(100, "layernorm"); },
                                 {"[arena]", "'layernorm'", "exceeds the capacity", "larger capacity"}));
  EXPECT_EQ(arena.used(), 1024u);  // the failed request took nothing
}

TEST(Arena, ScopesNestAndTensorsComeFromTheCurrentArena) {
  Arena outer(1 << 16), inner(1 << 16);
  EXPECT_THROW(current_arena("op"), Error);
  {
    ArenaScope a(outer);
    Tensor t = new_zeros({4, 8}, "op");
    EXPECT_EQ(t.shape(), (Shape{4, 8}));
    for (int i = 0; i < 32; ++i) EXPECT_EQ(t.f32()[i], 0.0f);
    {
      ArenaScope b(inner);
      EXPECT_EQ(&current_arena("op"), &inner);
    }
    EXPECT_EQ(&current_arena("op"), &outer);
  }
  EXPECT_THROW(current_arena("op"), Error);
}

}  // namespace
}  // namespace llmcc
