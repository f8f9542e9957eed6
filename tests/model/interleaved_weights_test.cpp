// A model whose Q8_0 or Q4_K matmul weights the loader interleaves in its huge-page copy against
// the same file read through the memory map (row-major, interleaved per panel from 8 tokens): the
// layouts the loader chose, then prompts and greedy decode. Prompts of 8 tokens or more run the
// same interleaved kernels on both, so their logits are bit-identical; decode (one token) runs
// the row-major kernels on the map, which add the same exact integer block sums in another
// float order, so logits agree to float rounding and the greedy tokens are the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "model_test_util.h"
#include "support/test_support.h"
#include "synth/synth.h"

namespace tangram {
namespace {

using testing::temp_dir;

std::unique_ptr<Model> load(const std::string& path, FileMemory memory) {
  ModelOptions o;
  o.weights = memory;
  auto m = Model::load(path, o);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(m).value() : nullptr;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Logits of a prompt (all rows) and of `decode` greedy steps after it.
struct Run {
  std::vector<float> prompt_logits;  // [prompt][vocab]
  std::vector<float> decode_logits;  // [decode][vocab]
  std::vector<int32_t> tokens;       // [decode] the greedy choices
};

Run run(Model& m, const std::vector<int32_t>& prompt, int decode) {
  ThreadPool pool(2);
  const int64_t vocab = m.config().vocab, n = static_cast<int64_t>(prompt.size());
  auto cache = m.new_cache(n + decode);
  Run r;
  r.prompt_logits.resize(static_cast<size_t>(n * vocab));
  EXPECT_TRUE(m.forward(*cache, prompt.data(), n, 0, r.prompt_logits.data(), pool, true).ok());
  std::vector<float> logits(r.prompt_logits.end() - vocab, r.prompt_logits.end());
  for (int i = 0; i < decode; ++i) {
    const int32_t tok = argmax(logits);
    r.tokens.push_back(tok);
    EXPECT_TRUE(m.forward(*cache, &tok, 1, cache->n_positions(), logits.data(), pool).ok());
    r.decode_logits.insert(r.decode_logits.end(), logits.begin(), logits.end());
  }
  return r;
}

void expect_same_run(const std::string& path, int64_t prompt_len) {
  auto huge = load(path, FileMemory::kHugePages);
  auto mapped = load(path, FileMemory::kMapped);
  ASSERT_TRUE(huge && mapped);
  const ModelWeights& w = huge->weights();
  EXPECT_EQ(w.token_embd.layout, TensorLayout::kRowMajor);  // looked up by rows: never rewritten
  for (const LayerWeights& L : w.layers)
    for (const TensorView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      EXPECT_EQ(v->layout,
                (v->type == GgmlType::Q8_0 || v->type == GgmlType::Q4_K) && v->rows() >= 16
                    ? TensorLayout::kInterleaved16
                    : TensorLayout::kRowMajor)
          << v->name;
  EXPECT_EQ(mapped->weights().layers[0].wq.layout, TensorLayout::kRowMajor);

  const auto prompt = testing::random_tokens(prompt_len, huge->config().vocab, 7);
  const Run a = run(*huge, prompt, 12), b = run(*mapped, prompt, 12);
  EXPECT_EQ(a.prompt_logits, b.prompt_logits);  // the same kernels on the same groups
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.decode_logits.size(), b.decode_logits.size());
  float scale = 0;
  for (const float x : b.decode_logits) scale = std::max(scale, std::abs(x));
  // Float rounding of a few layers' sums in another order (measured: at most 2e-6 absolute).
  EXPECT_LE(testing::max_abs_diff(a.decode_logits.data(), b.decode_logits.data(),
                                  static_cast<int64_t>(a.decode_logits.size())),
            1e-4 * static_cast<double>(scale));
}

// Generated Q8_0 qwen3: a vocabulary of 500 leaves output.weight a 4-row row-major tail.
TEST(InterleavedWeightsModel, GeneratedQ8_0HugePagesMatchMap) {
  auto spec = synth_preset("tiny-qwen3");
  ASSERT_TRUE(spec.ok());
  spec->weight_type = GgmlType::Q8_0;
  spec->vocab = 500;
  const std::string path = testing::write_synth(*spec, "interleaved-q8_0.gguf");
  auto huge = load(path, FileMemory::kHugePages);
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->weights().output.layout, TensorLayout::kInterleaved16);
  EXPECT_EQ(huge->weights().output.interleaved_rows(), 496);
  expect_same_run(path, 20);
}

// Generated Q4_K qwen3 (the synthesiser makes the matrices under 256 columns wide Q8_0): Q4_K
// groups read in place at every token count against the map's row-major Q4_K kernels below 8
// tokens; the 500-row output.weight keeps a tail of 4.
TEST(InterleavedWeightsModel, GeneratedQ4_KHugePagesMatchMap) {
  auto spec = synth_preset("tiny-qwen3");
  ASSERT_TRUE(spec.ok());
  spec->weight_type = GgmlType::Q4_K;
  spec->vocab = 500;
  const std::string path = testing::write_synth(*spec, "interleaved-q4_k.gguf");
  auto huge = load(path, FileMemory::kHugePages);
  ASSERT_TRUE(huge);
  const ModelWeights& w = huge->weights();
  ASSERT_EQ(w.output.type, GgmlType::Q4_K);
  EXPECT_EQ(w.output.layout, TensorLayout::kInterleaved16);
  EXPECT_EQ(w.output.interleaved_rows(), 496);
  EXPECT_EQ(w.layers[0].wq.type, GgmlType::Q4_K);
  expect_same_run(path, 20);
}

// The real stories260K model with its matrices quantised to Q8_0 where their width allows
// (ffn_down's 172 columns do not): ffn_gate and ffn_up have 172 rows, a tail of 12. (Its
// widths, 64 and 172, are under Q4_K's 256-column block: it has no Q4_K counterpart.)
TEST(InterleavedWeightsModel, RealStories260KInQ8_0HugePagesMatchMap) {
  auto g = GgufFile::open(testing::data_file("models/stories260K/stories260K.gguf").string());
  ASSERT_TRUE(g.ok()) << g.message();
  GgufWriter w;
  for (const GgufKV& kv : (*g)->metadata()) w.set_value(kv.key, kv.value);
  for (const GgufTensorInfo& t : (*g)->tensors()) {
    const TensorView v = (*g)->view(t);
    const std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + std::max(t.n_dims, 1));
    if (t.n_dims != 2 || t.type != GgmlType::F32 || t.ne[0] % 32 != 0) {
      ASSERT_TRUE(w.add_tensor(t.name, t.type, ne, v.data, v.nbytes).ok());
      continue;
    }
    const size_t rb = ggml_row_bytes(GgmlType::Q8_0, t.ne[0]);
    std::vector<uint8_t> q(rb * static_cast<size_t>(t.ne[1]));  // [rows][rb]
    for (int64_t r = 0; r < t.ne[1]; ++r)
      quantize_row(GgmlType::Q8_0, reinterpret_cast<const float*>(v.data) + r * t.ne[0],
                   q.data() + r * rb, t.ne[0]);
    ASSERT_TRUE(w.add_tensor(t.name, GgmlType::Q8_0, ne, q.data(), q.size()).ok());
  }
  const std::string path = (temp_dir() / "stories260K-q8_0.gguf").string();
  ASSERT_TRUE(w.write(path).ok());
  expect_same_run(path, 9);
}

}  // namespace
}  // namespace tangram
