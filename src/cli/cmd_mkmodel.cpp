// `tangram mkmodel`: write a GGUF with seeded random weights for any supported architecture,
// shape and weight type, optionally embedding a real tokenizer so it tokenises like that family.
#include <cstdio>

#include <fmt/format.h>

#include "cli/cli_error.h"
#include "cli/commands.h"
#include "cli/vocab_source.h"
#include "common/units.h"
#include "gguf/gguf_file.h"
#include "synth/synth.h"

namespace tangram::cli {
int cmd_mkmodel(const MkmodelOptions& opt) {
  auto preset = synth_preset(opt.preset.empty() ? "tiny-llama" : opt.preset);
  if (!preset) return fail(preset.message());
  SynthSpec spec = *preset;
  if (!opt.arch.empty()) {
    if (opt.arch == "llama") spec.arch = Arch::Llama;
    else if (opt.arch == "qwen2") spec.arch = Arch::Qwen2;
    else if (opt.arch == "qwen3") spec.arch = Arch::Qwen3;
    else return fail(fmt::format("unknown architecture '{}': use llama, qwen2 or qwen3", opt.arch));
  }
  auto set = [](auto& field, auto value) { if (value > 0) field = value; };
  set(spec.n_layers, opt.n_layers);
  set(spec.n_embd, opt.n_embd);
  set(spec.n_ff, opt.n_ff);
  set(spec.n_head, opt.n_head);
  set(spec.n_kv_head, opt.n_kv_head);
  set(spec.head_dim, opt.head_dim);
  set(spec.vocab, opt.vocab);
  set(spec.ctx, opt.ctx);
  spec.seed = opt.seed;
  if (opt.tied) spec.tied_output = true;
  // A rope_freqs.weight tensor, as llama.cpp's converter writes it, so other engines load the file too.
  if (opt.llama3_rope) spec.llama3_rope = SynthRopeScaling::Llama3Tensor;
  if (auto st = synth_set_weight_type(spec, opt.type); !st) return fail(st.message());

  if (!opt.tokenizer.empty()) {
    auto vocab = load_vocab_file(opt.tokenizer, opt.flavor);
    if (!vocab) return fail(vocab.message());
    // The embedding table must cover every token id (Qwen pads it past the vocabulary).
    if (spec.vocab < vocab->n_tokens()) spec.vocab = vocab->n_tokens();
    Vocab v = std::move(*vocab);
    spec.write_vocab = [v](GgufWriter& w) { vocab_to_gguf(v, w); };
  }

  const ModelConfig cfg = synth_config(spec);
  fmt::print("writing {}: {} {} layers, n_embd {}, n_ff {}, {} q heads / {} kv heads x {}, vocab {}, ctx {}, {}\n",
             opt.out, arch_name(cfg.arch), cfg.n_layers, cfg.n_embd, cfg.n_ff, cfg.n_head, cfg.n_kv_head,
             cfg.head_dim, cfg.vocab, cfg.context_length, opt.type);
  if (auto st = write_synth_model(spec, opt.out, opt.threads); !st) return fail(st.message());
  auto check = GgufFile::open(opt.out);
  if (!check) return fail("the written file does not read back: " + check.message());
  fmt::print("done: {} tensors, {}\n", (*check)->tensors().size(),
             format_bytes(static_cast<double>((*check)->file_size())));
  return 0;
}

}  // namespace tangram::cli
