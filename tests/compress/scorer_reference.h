// Plain double-precision references for the KV compression scorers, written from each method's
// definition with straightforward loops. They share no code with src/compress (RoPE included:
// rotation here is recomputed from the rope settings, not taken from model/rope.h).
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace tangram::testing::ref {

// Rotary settings as the model describes them.
struct RopeSpec {
  RopeLayout layout = RopeLayout::Interleaved;
  int rope_dim = 0;  // rotated leading elements (even, <= head_dim)
  double base = 10000.0;
};

// One KV head's input in double.
struct HeadData {
  int head_dim = 0;
  int head_dim_v = 0;
  int group = 1;                         // q_per_kv
  std::vector<double> keys;              // [n][head_dim] after RoPE
  std::vector<double> values;            // [n][head_dim_v]
  std::vector<int32_t> positions;        // [n]
  std::vector<double> queries;           // [n_queries][group][head_dim] after RoPE
  std::vector<int32_t> query_positions;  // [n_queries]
  int64_t next_position = 0;
  int64_t n() const { return static_cast<int64_t>(positions.size()); }
  int64_t n_queries() const { return static_cast<int64_t>(query_positions.size()); }
};

// Rotates x[head_dim] in place by angle(i) = angle_scale * pos * base^(-2i/rope_dim) per pair;
// angle_scale = -1 undoes the rotation of position pos.
void rotate(const RopeSpec& rope, double pos, double angle_scale, double* x, int head_dim);

std::vector<double> snapkv(const HeadData& h, int window, int kernel);
std::vector<double> tova(const HeadData& h);
std::vector<double> keydiff(const HeadData& h);
std::vector<double> streamingllm(const HeadData& h);
struct EaParams {
  int skip = 4;
  int future = 512;
  double epsilon = 1e-2;
  bool covariance = true;
  bool value_norm = true;
};
std::vector<double> expected_attention(const HeadData& h, const RopeSpec& rope, const EaParams& p);
std::vector<double> kvzip(const HeadData& h);

}  // namespace tangram::testing::ref
