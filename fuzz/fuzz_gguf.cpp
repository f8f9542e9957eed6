// GGUF reader: parses arbitrary bytes as a GGUF image, then goes through everything a model
// loader touches: every metadata value (typed getters, arrays, rendering), the tensor directory,
// each tensor's view (every byte read, so ASan sees an out-of-bounds view), the model config
// and the tokenizer built from the metadata. Any of them may refuse the file; none may crash.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "gguf/gguf_file.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

using namespace tangram;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::open_memory("fuzz.gguf", data, size);
  if (!file.ok()) return 0;
  const GgufFile& f = **file;
  TG_FUZZ_CHECK(f.data_offset() <= f.file_size());
  size_t sink = 0;
  for (const GgufKV& kv : f.metadata()) {
    TG_FUZZ_CHECK(f.find(kv.key) != nullptr);
    sink += kv.value.to_string().size() + kv.value.array_size();
    sink += f.get_string(kv.key).value_or("").size();
    sink += static_cast<size_t>(f.get_int(kv.key).value_or(0));
    sink += f.get_float(kv.key).has_value() + f.get_bool(kv.key).has_value();
    if (const auto* s = f.get_string_array(kv.key)) sink += s->size();
    if (const auto* i = f.get_int_array(kv.key)) sink += i->size();
    if (const auto* x = f.get_float_array(kv.key)) sink += x->size();
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    TG_FUZZ_CHECK(f.find_tensor(t.name) != nullptr);
    const TensorView v = f.view(t);
    TG_FUZZ_CHECK(v.nbytes == t.nbytes);
    for (size_t i = 0; i < v.nbytes; ++i) sink += v.data[i];
    const TensorView by_name = f.view(t.name);
    sink += by_name.nbytes + static_cast<size_t>(by_name.n_dims);
  }
  // What `tangram run` does next with the file.
  if (auto config = read_model_config(f); config.ok()) sink += static_cast<size_t>(config->q_dim());
  if (auto tok = Tokenizer::from_gguf(f); tok.ok()) {
    const std::vector<int32_t> ids = (*tok)->encode("Hello world <s> \xff", true, true);
    sink += (*tok)->decode(ids, false).size();
  }
  // Keeps the reads above from being optimised away.
  volatile size_t keep = sink;
  (void)keep;
  return 0;
}
