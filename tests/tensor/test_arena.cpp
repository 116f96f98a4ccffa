#include "llmcc/arena.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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

// Records every request and serves it from its own vector, as an embedding's allocator would.
class RecordingSource final : public llmcc::ArenaSource {
 public:
  void* allocate(std::size_t bytes, const char* what) override {
    requests.emplace_back(bytes, what);
    blocks.emplace_back(bytes / sizeof(float) + 16);
    auto p = reinterpret_cast<std::uintptr_t>(blocks.back().data());
    return reinterpret_cast<void*>((p + 63) / 64 * 64);
  }
  std::vector<std::pair<std::size_t, std::string>> requests;
  std::vector<std::vector<float>> blocks;
};

TEST(Arena, ASourceServesEveryAllocation) {
  RecordingSource source;
  llmcc::Arena arena(source);
  llmcc::ArenaScope scope(arena);
  const llmcc::Tensor a = llmcc::new_tensor(llmcc::Shape{3, 5}, "first");
  const llmcc::Tensor b = llmcc::new_zeros(llmcc::Shape{7}, "second");
  ASSERT_EQ(source.requests.size(), 2u);
  EXPECT_EQ(source.requests[0].first, 64u);  // 60 bytes, rounded to the alignment
  EXPECT_EQ(source.requests[0].second, "first");
  EXPECT_EQ(source.requests[1].second, "second");
  EXPECT_EQ(arena.used(), 128u);
  EXPECT_EQ(arena.capacity(), 0u);
  EXPECT_FALSE(arena.owns(a.address()));
  for (int i = 0; i < 7; ++i) EXPECT_EQ(b.f32()[i], 0.0f);
  arena.poison_and_reset();  // forgets the count; the source's memory is not touched
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_EQ(b.f32()[0], 0.0f);
  EXPECT_EQ(arena.high_water(), 128u);
}

}  // namespace
}  // namespace llmcc
