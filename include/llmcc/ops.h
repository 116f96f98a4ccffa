// Every op (adgen rule) of the library: one include per op, in alphabetical order.
#pragma once

#include "llmcc/ops/add.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/bidirectional_attention.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/mean_pool.h"
#include "llmcc/ops/mse_loss.h"
#include "llmcc/ops/mul.h"
#include "llmcc/ops/rmsnorm.h"
#include "llmcc/ops/rope.h"
#include "llmcc/ops/scale.h"
#include "llmcc/ops/silu.h"
#include "llmcc/ops/view.h"
