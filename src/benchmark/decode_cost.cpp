#include "benchmark/decode_cost.h"

#include "gguf/gguf_file.h"

namespace tangram::bench {

DecodeCost decode_cost(const Model& m) {
  DecodeCost c;
  const GgufFile& g = m.gguf();
  const bool tied = g.find_tensor("output.weight") == nullptr;
  for (const auto& t : g.tensors()) {
    if (t.n_dims < 2) continue;
    if (t.name == "token_embd.weight" && !tied) continue;
    c.weight_bytes += static_cast<double>(t.nbytes);
    c.matmul_flops += 2.0 * static_cast<double>(t.ne[0] * t.ne[1]);
  }
  return c;
}

}  // namespace tangram::bench
