// Counts the heap allocations of a test executable, to check that a loop allocates nothing of its
// own: replaces the global operator new (and its deletes) with malloc-based ones that count.
// The replacements are definitions, so only one source file of an executable includes this.
//
// GCC sees the replaced delete's free() inlined where a new-expression's pointer arrives and
// warns of a mismatch; both sides are these malloc-based ones, so the warning is switched off
// for the file that includes this.
#pragma once

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace llmcc::test {

// Heap allocations through operator new since the process started.
inline std::atomic<long> g_allocations{0};

inline long allocations() { return g_allocations.load(); }

}  // namespace llmcc::test

void* operator new(std::size_t n) {
  llmcc::test::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
