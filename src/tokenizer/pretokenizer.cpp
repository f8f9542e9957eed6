#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/utf8.h"

namespace tangram {

namespace {

// The published pre-tokenizer patterns (GPT-2's encoder.py; Meta's Llama 3 tokenizer.py; Qwen2's
// tokenizer.json, which is Llama 3's with single digits).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  if (n < 0) return "unknown PCRE2 error";
  return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::~PreTokenizer() = default;

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create(std::string_view pre) {
  if (pre.empty() || pre == "default" || pre == "gpt-2" || pre == "gpt2") {
    return from_pattern(kGpt2Pattern);
  }
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3")
    return from_pattern(kLlama3Pattern);
  if (pre == "qwen2") return from_pattern(kQwen2Pattern);
  return make_error(
      "tokenizer: unsupported BPE pre-tokenizer '{}' (supported: default, gpt-2, llama-bpe, "
      "llama3, "
      "qwen2)",
      pre);
}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::from_pattern(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (code == nullptr) {
    return make_error("tokenizer: cannot compile pre-tokenizer regex at offset {}: {}", err_offset,
                      pcre2_message(err));
  }
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  p->compiled_ = std::make_unique<Compiled>();
  p->compiled_->code = code;
  // Without JIT support the interpreter gives the same matches, only slower.
  p->compiled_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return p;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> out;
  size_t run_start = 0;  // start of the current valid (or invalid) run
  size_t pos = 0;
  bool in_valid = true;
  while (pos < text.size()) {
    const Utf8Char c = utf8_decode(text, pos);
    const bool valid = c.status == Utf8Status::kComplete;
    if (valid != in_valid) {
      if (pos > run_start) {
        const std::string_view run = text.substr(run_start, pos - run_start);
        if (in_valid)
          split_valid(run, out);
        else
          out.push_back(run);
      }
      run_start = pos;
      in_valid = valid;
    }
    pos += valid ? c.length : 1;
  }
  if (pos > run_start) {
    const std::string_view run = text.substr(run_start, pos - run_start);
    if (in_valid)
      split_valid(run, out);
    else
      out.push_back(run);
  }
  return out;
}

void PreTokenizer::split_valid(std::string_view text, std::vector<std::string_view>& out) const {
  const std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr));
  if (!md) {
    out.push_back(text);
    return;
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t offset = 0;
  while (offset < n) {
    int rc = -1;
    if (compiled_->jit)
      rc = pcre2_jit_match(compiled_->code, subject, n, offset, 0, md.get(), nullptr);
    // The interpreter is the fallback when JIT is missing or runs out of its stack.
    if (!compiled_->jit || (rc < 0 && rc != PCRE2_ERROR_NOMATCH)) {
      rc = pcre2_match(compiled_->code, subject, n, offset, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       md.get(), nullptr);
    }
    if (rc < 0) {
      // No further match (or a resource error): the rest is one piece.
      out.push_back(text.substr(offset));
      return;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t start = ov[0];
    size_t end = ov[1];
    if (start < offset || end < start || end > n) {  // cannot happen; stay in bounds regardless
      out.push_back(text.substr(offset));
      return;
    }
    if (start > offset) out.push_back(text.substr(offset, start - offset));
    if (end == start) {
      // An empty match would loop forever: take one character into the gap instead.
      const Utf8Char c = utf8_decode(text, start);
      end = start + (c.status == Utf8Status::kComplete ? c.length : 1);
      out.push_back(text.substr(start, end - start));
    } else {
      out.push_back(text.substr(start, end - start));
    }
    offset = end;
  }
}

}  // namespace tangram
