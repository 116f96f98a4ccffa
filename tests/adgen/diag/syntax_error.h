#include "diag/common.h"
namespace diag {
// expect-error: 4:71: expected ';' after return statement
LLMCC_ADGEN_ENTRY inline float loss(const Tensor& x) { return total(x) }
}  // namespace diag
