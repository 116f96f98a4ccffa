#include "tensor/large_alloc.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "llmcc/arena.h"
#include "llmcc/parameters.h"
#include "test_support.h"

namespace llmcc {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// The VmFlags line of the mapping in /proc/self/smaps that contains p ("" when not found).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool kernel_has_thp() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  return enabled.good();
}

TEST(LargeAlloc, BigBuffersAreHugePageAlignedAndAdvised) {
  unsetenv("LLMCC_HUGE_PAGES");  // the default, whatever the caller's environment
  const std::size_t bytes = 3 * kHugePage + 12345;
  void* p = allocate_large(bytes);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % kHugePage, 0u);
  static_cast<unsigned char*>(p)[bytes - 1] = 1;  // the whole request is usable
  if (!kernel_has_thp()) {
    std::free(p);
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  // "hg": the mapping carries MADV_HUGEPAGE, whatever the system-wide THP mode.
  const std::string flags = vm_flags_of(p);
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  std::free(p);
}

TEST(LargeAlloc, SmallBuffersAreCacheLineAlignedOnly) {
  // Under a huge page: no 2 MB rounding (a whole huge page would back the first touch).
  for (std::size_t bytes : {std::size_t{1}, std::size_t{100}, std::size_t{4096}, kHugePage - 64}) {
    void* p = allocate_large(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
    static_cast<unsigned char*>(p)[bytes - 1] = 1;
    std::free(p);
  }
}

// LLMCC_HUGE_PAGES=0: the same alignment, without the advice (each test runs in its own process
// under ctest, so this is the process's first large mapping, not one reused from an earlier test).
TEST(LargeAlloc, EnvironmentCanTurnTheAdviceOff) {
  setenv("LLMCC_HUGE_PAGES", "0", 1);
  void* p = allocate_large(4 * kHugePage);
  unsetenv("LLMCC_HUGE_PAGES");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % kHugePage, 0u);
  if (kernel_has_thp()) {
    EXPECT_EQ(vm_flags_of(p).find(" hg"), std::string::npos) << vm_flags_of(p);
  }
  std::free(p);
}

TEST(LargeAlloc, ArenasAndParameterStoresUseIt) {
  unsetenv("LLMCC_HUGE_PAGES");
  Arena arena(5 * kHugePage);
  void* a = arena.allocate(64, "first");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % kHugePage, 0u);
  ParameterStore store({{"w", Shape({1024, 1024})}});  // 4 MiB
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(store.data()) % kHugePage, 0u);
  if (kernel_has_thp()) {
    EXPECT_NE(vm_flags_of(a).find(" hg"), std::string::npos);
    EXPECT_NE(vm_flags_of(store.data()).find(" hg"), std::string::npos);
  }
}

}  // namespace
}  // namespace llmcc
