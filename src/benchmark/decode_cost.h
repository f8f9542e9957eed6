// The bytes and FLOPs one decode token costs, to turn tok/s into GB/s and GFLOP/s against the
// machine's measured peak.
#pragma once

#include "model/model.h"

namespace tangram::bench {

struct DecodeCost {
  double weight_bytes = 0;  // every matrix a decode step reads in full (the embedding table
                            // only when it doubles as the output projection)
  double matmul_flops = 0;  // 2 x those matrices' parameters
};
DecodeCost decode_cost(const Model& m);

}  // namespace tangram::bench
