"""Export a checkpoint as a GGUF file the engine loads (arch qwen3, SPM "llama" vocabulary,
ChatML template in the metadata).

Usage: /usr/bin/python3 tools/train/export_gguf.py --run tools/train/runs/main [--ckpt FILE]
       [--out FILE] [--f16] [--data tools/train/runs/data]
"""
import argparse
import os

import torch

from gguf_writer import GgufWriter
from model import Model, ModelConfig
from tok import Tok

# ChatML, the format the model is trained on (see convgen.render); generation prompt included.
# It starts with the BOS token because every training row starts with it.
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def export(model, tok, path, f16=False, name="tangram-chat"):
    cfg = model.cfg
    w = GgufWriter()
    a = "qwen3"
    w.add_string("general.architecture", a)
    w.add_string("general.name", name)
    w.add_string("general.license", "Apache-2.0")
    w.add_u32(f"{a}.block_count", cfg.n_layer)
    w.add_u32(f"{a}.context_length", cfg.context)
    w.add_u32(f"{a}.embedding_length", cfg.d_model)
    w.add_u32(f"{a}.feed_forward_length", cfg.d_ff)
    w.add_u32(f"{a}.attention.head_count", cfg.n_head)
    w.add_u32(f"{a}.attention.head_count_kv", cfg.n_kv_head)
    w.add_u32(f"{a}.attention.key_length", cfg.head_dim)
    w.add_u32(f"{a}.attention.value_length", cfg.head_dim)
    w.add_u32(f"{a}.rope.dimension_count", cfg.head_dim)
    w.add_f32(f"{a}.rope.freq_base", cfg.rope_base)
    w.add_f32(f"{a}.attention.layer_norm_rms_epsilon", cfg.eps)

    toks, scores, types = tok.gguf_vocab()
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_string("tokenizer.ggml.pre", "default")
    w.add_string_array("tokenizer.ggml.tokens", toks)
    w.add_f32_array("tokenizer.ggml.scores", scores)
    w.add_i32_array("tokenizer.ggml.token_type", types)
    w.add_u32("tokenizer.ggml.bos_token_id", tok.bos)
    w.add_u32("tokenizer.ggml.eos_token_id", tok.im_end)
    w.add_u32("tokenizer.ggml.eot_token_id", tok.im_end)
    w.add_u32("tokenizer.ggml.unknown_token_id", tok.sp.unk_id())
    w.add_u32("tokenizer.ggml.padding_token_id", tok.eot)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_bool("tokenizer.ggml.add_space_prefix", False)
    w.add_string("tokenizer.chat_template", CHAT_TEMPLATE)

    sd = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    # Norm vectors stay F32 (tiny, and the engine widens them anyway); matrices may be F16.
    w.add_tensor("token_embd.weight", sd["embed.weight"], f16)
    w.add_tensor("output_norm.weight", sd["norm.weight"])
    names = {"attn_norm.weight": "attn_norm.weight", "attn.wq.weight": "attn_q.weight",
             "attn.wk.weight": "attn_k.weight", "attn.wv.weight": "attn_v.weight",
             "attn.wo.weight": "attn_output.weight", "attn.q_norm.weight": "attn_q_norm.weight",
             "attn.k_norm.weight": "attn_k_norm.weight", "ffn_norm.weight": "ffn_norm.weight",
             "mlp.gate.weight": "ffn_gate.weight", "mlp.up.weight": "ffn_up.weight",
             "mlp.down.weight": "ffn_down.weight"}
    for l in range(cfg.n_layer):
        for ours, theirs in names.items():
            arr = sd[f"blocks.{l}.{ours}"]
            w.add_tensor(f"blk.{l}.{theirs}", arr, f16 and arr.ndim == 2)
    w.write(path)


def load_checkpoint(path):
    ck = torch.load(path, map_location="cpu")
    model = Model(ModelConfig(**ck["model_config"]))
    model.load_state_dict(ck["model"])
    return model, ck


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--run", required=True)
    ap.add_argument("--ckpt", help="default: RUN/ckpt.pt")
    ap.add_argument("--out", help="default: RUN/model-f32.gguf or model-f16.gguf")
    ap.add_argument("--f16", action="store_true")
    ap.add_argument("--data", help="prepared data folder with tok.model (default: RUN/../data)")
    a = ap.parse_args()
    model, ck = load_checkpoint(a.ckpt or os.path.join(a.run, "ckpt.pt"))
    data = a.data or os.path.join(os.path.dirname(a.run.rstrip("/")), "data")
    tok = Tok(os.path.join(data, "tok.model"))
    out = a.out or os.path.join(a.run, "model-f16.gguf" if a.f16 else "model-f32.gguf")
    export(model, tok, out, a.f16)
    print(f"wrote {out} (step {ck.get('step')}, {os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
