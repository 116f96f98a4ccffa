#include "tensor/large_alloc.h"

#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace llmcc {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kLine = 64;

[[maybe_unused]] bool huge_pages_wanted() {
  const char* v = std::getenv("LLMCC_HUGE_PAGES");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace

void* allocate_large(std::size_t bytes) {
  // Below a huge page there is nothing to gain, and a whole one would back the first touch.
  if (bytes < kHugePage) return std::aligned_alloc(kLine, (bytes + kLine - 1) / kLine * kLine);
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
#if defined(MADV_HUGEPAGE)
  // Advice only: without THP support it fails, and the memory is still good on small pages.
  if (p != nullptr && huge_pages_wanted()) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace llmcc
