// Internal: the attention inner loop over Q8_0 KV rows (kv_row.h), the counterpart of
// attend_heads for F16/F32 rows, which dispatches here. Keys are read as q * d per 32-element
// block and dotted with the float query (no query quantisation: the only error is the KV
// rows' own); values are accumulated as p * (q * d). Rows are widened in registers, never
// written out, so a step reads 34 bytes per 32 elements.
#pragma once

#include <cstdint>
#include <span>

#include "kv/attention_kernel.h"

namespace tangram {

// Which implementation runs: Portable (scalar, any build) or Avx2 (needs an AVX2+F16C build).
enum class Q8AttentionPath { Portable, Avx2 };

// The best path this build has.
Q8AttentionPath default_q8_attention_path();
// Every path this build can run (tests compare each against a reference).
std::span<const Q8AttentionPath> available_q8_attention_paths();

// Same contract as attend_heads; head_dim and head_dim_v are multiples of 32.
void attend_heads_q8(std::span<const HeadLanes> heads, int head_dim, int head_dim_v, int64_t begin,
                     Q8AttentionPath path = default_q8_attention_path());

}  // namespace tangram
