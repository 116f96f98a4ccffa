// Reference kernels run as the scalar loops they are written as, whatever the compiler.
//
// GCC at -O3 vectorises some of their loops: a float sum is then taken in order from a vector of
// products (the products rounded, then added one by one), while the loop's scalar copy, which
// runs for the last elements and whenever operands lie closer together than a vector (a run-time
// overlap check), fuses each product into the sum. The two copies round differently, so a
// result would depend on where the operands lie: a backward with checkpointing, whose arena
// layout differs, would not give the plain backward's bits (tests/ops/test_operand_placement.cpp).
// Between LLMCC_REF_KERNELS_BEGIN and LLMCC_REF_KERNELS_END (around each header's kernels),
// GCC does not vectorise loops. Clang contracts only within one expression, the same in both
// copies, and does not vectorise float sums in order, so it needs nothing.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#define LLMCC_REF_KERNELS_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"no-tree-vectorize\")")
#define LLMCC_REF_KERNELS_END _Pragma("GCC pop_options")
#else
#define LLMCC_REF_KERNELS_BEGIN
#define LLMCC_REF_KERNELS_END
#endif
