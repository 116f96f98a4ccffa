// Allocation of the large, long-lived buffers (the step arena, the parameter, gradient and
// optimizer stores) on transparent huge pages where the kernel offers them.
//
// A training step walks these buffers with strides of one activation or weight row (3-12 KB):
// packing a GEMM panel touches 8-16 rows, so 8-16 pages, and GPT-2's 124M weights span about
// 120,000 4 KB pages against the 2,048 entries of Zen 3's second-level TLB. On 2 MB pages the
// same buffers need a few hundred entries. Linux's default THP mode on many distributions is
// "madvise", which gives huge pages only to regions that ask (MADV_HUGEPAGE); this asks.
// The measurement: docs/perf.md, "Threads and memory".
#pragma once

#include <cstddef>

namespace llmcc {

// At least `bytes` of uninitialised memory, or null when out of memory; from 2 MB up aligned to
// 2 MB (so that whole huge pages can back it) and marked for huge pages, below that 64-byte
// aligned. Free with std::free. LLMCC_HUGE_PAGES=0 in the environment skips
// the request (for comparison runs).
void* allocate_large(std::size_t bytes);

}  // namespace llmcc
