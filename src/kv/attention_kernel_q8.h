// Internal: the attention inner loops over Q8_0 KV rows (kv_row.h), which attend_heads runs
// for KvType::Q8_0 inside its shared online-softmax walk. Keys are read as q * d per 32-element
// block and dotted with the float query (no query quantisation: the only error is the KV rows'
// own); values are accumulated as p * (q * d). Rows are widened in registers, never written
// out, so a step reads 34 bytes per 32 elements. head_dim and head_dim_v are multiples of 32.
#pragma once

#include "kv/attention_kernel.h"

namespace tangram::kv_q8 {

// The loops attend_heads runs: AVX2 in an AVX2+F16C build (every dispatch level uses them;
// there is no AVX-512 version yet), the portable ones otherwise.
BlockKernels block_kernels();
// The portable loops (any build): tests compare them with the vector ones.
BlockKernels portable_kernels();

}  // namespace tangram::kv_q8
