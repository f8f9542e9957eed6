// `tangram mkmodel`: write a GGUF with seeded random weights for any supported architecture,
// shape and weight type, optionally embedding a real tokenizer so it tokenises like that family.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
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
    if (opt.arch == "llama")
      spec.arch = Arch::Llama;
    else if (opt.arch == "qwen2")
      spec.arch = Arch::Qwen2;
    else if (opt.arch == "qwen3")
      spec.arch = Arch::Qwen3;
    else
      return fail(fmt::format("unknown architecture '{}': use llama, qwen2 or qwen3", opt.arch));
  }
  auto set = [](auto& field, auto value) {
    if (value > 0) field = value;
  };
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
  // A rope_freqs.weight tensor, as llama.cpp's converter writes it, so other engines load the file
  // too.
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
  fmt::print(
      "writing {}: {} {} layers, n_embd {}, n_ff {}, {} q heads / {} kv heads x {}, vocab {}, ctx "
      "{}, {}\n",
      opt.out, arch_name(cfg.arch), cfg.n_layers, cfg.n_embd, cfg.n_ff, cfg.n_head, cfg.n_kv_head,
      cfg.head_dim, cfg.vocab, cfg.context_length, opt.type);
  if (auto st = write_synth_model(spec, opt.out, opt.threads); !st) return fail(st.message());
  auto check = GgufFile::open(opt.out);
  if (!check) return fail("the written file does not read back: " + check.message());
  fmt::print("done: {} tensors, {}\n", (*check)->tensors().size(),
             format_bytes(static_cast<double>((*check)->file_size())));
  return 0;
}

Command register_mkmodel(CLI::App& app) {
  auto opt = std::make_shared<MkmodelOptions>();
  MkmodelOptions& mk = *opt;
  auto* c_mk = app.add_subcommand(
      "mkmodel", "Write a GGUF model with seeded random weights (for tests and benchmarks)");
  c_mk->add_option(
      "--preset", mk.preset,
      "tiny-llama, tiny-qwen2, tiny-qwen3, qwen3-4b-attn or llama3-8b-attn (default tiny-llama)");
  c_mk->add_option("--arch", mk.arch, "Override the architecture: llama, qwen2 or qwen3");
  c_mk->add_option("--layers", mk.n_layers, "Override the number of layers")
      ->check(CLI::PositiveNumber);
  c_mk->add_option("--embd", mk.n_embd, "Override the embedding width")->check(CLI::PositiveNumber);
  c_mk->add_option("--ff", mk.n_ff, "Override the MLP width")->check(CLI::PositiveNumber);
  c_mk->add_option("--heads", mk.n_head, "Override the number of query heads")
      ->check(CLI::PositiveNumber);
  c_mk->add_option("--kv-heads", mk.n_kv_head, "Override the number of KV heads")
      ->check(CLI::PositiveNumber);
  c_mk->add_option("--head-dim", mk.head_dim, "Override the head size")->check(CLI::PositiveNumber);
  c_mk->add_option("--vocab", mk.vocab, "Override the vocabulary size")->check(CLI::PositiveNumber);
  c_mk->add_option("--ctx", mk.ctx, "Override the context length")->check(CLI::PositiveNumber);
  c_mk->add_option("--type", mk.type, "Weight type: f32 f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m")
      ->capture_default_str();
  c_mk->add_option("--seed", mk.seed, "Seed of the random weights")->capture_default_str();
  c_mk->add_flag("--tied", mk.tied, "Tie the output projection to the embedding");
  c_mk->add_flag(
      "--llama3-rope", mk.llama3_rope,
      "Add Llama-3 RoPE scaling (a rope_freqs.weight tensor, as converted Llama 3.1 files have)");
  c_mk->add_option(
          "--tokenizer", mk.tokenizer,
          "Embed this vocabulary: a GGUF, a SentencePiece tokenizer.model or a tiktoken file")
      ->check(CLI::ExistingFile);
  c_mk->add_option("--flavor", mk.flavor, "For tiktoken files: llama3 or qwen2");
  c_mk->add_option("-o,--out", mk.out, "Output GGUF path")->required();
  c_mk->add_option("-t,--threads", mk.threads, "Threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  return {c_mk, [opt] { return cmd_mkmodel(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
