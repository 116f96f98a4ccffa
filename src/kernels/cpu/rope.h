// Fast kernels for rope on float: a per-call cos/sin table (T, HS/2) from the current arena
// (angles in double, stored as float), then OpenMP over (b, t) rows.
#pragma once

#include <cstdint>

#include "llmcc/ops/rope.h"

namespace llmcc::cpu {

// Same maths as ref::rope_forward.  x, out: (B, T, NH * HS). Needs an ArenaScope (the table).
void rope_forward(float* out, const float* x, int B, int T, int NH, int HS, const RopeConfig& cfg, int pos_offset);

// d_x += inverse rotation of d_out, as ref::rope_backward.  d_out, d_x: (B, T, NH * HS).
void rope_backward(float* d_x, const float* d_out, int B, int T, int NH, int HS, const RopeConfig& cfg, int pos_offset);

}  // namespace llmcc::cpu
