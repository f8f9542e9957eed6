"""Measure training tokens/s of a model shape on this machine (forward, backward, AdamW step).

Usage: /usr/bin/python3 tools/train/measure_speed.py --preset main --T 256,1024 \
           [--set d_model=192 --set head_dim=32] [--steps 3] [--threads 1]
The README's size choice is based on these numbers.
"""
import argparse
import time

import torch
import torch.nn.functional as F

from model import PRESETS, Model, ModelConfig


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="main")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--T", default="256,512,1024,2048")
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    d = PRESETS[a.preset].to_dict()
    for kv in a.set:
        k, v = kv.split("=")
        d[k] = type(d[k])(v)
    cfg = ModelConfig(**d)
    model = Model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    print(f"{model.n_params()/1e6:.2f}M params {cfg}")
    for T in [int(t) for t in a.T.split(",")]:
        B = max(1, a.batch_tokens // T)
        x = torch.randint(0, cfg.vocab, (B, T + 1))
        times = []
        for i in range(a.steps + 1):
            t0 = time.time()
            logits = model(x[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), x[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i:
                times.append(time.time() - t0)
        dt = sum(times) / len(times)
        print(f"T={T} B={B}: {dt:.2f} s/step, {B*T/dt:.0f} tokens/s", flush=True)


if __name__ == "__main__":
    main()
