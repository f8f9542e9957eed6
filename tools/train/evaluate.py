"""Held-out evaluation: exact recall on generated conversations and prose perplexity.

Recall is measured as greedy decoding would score it, from one forward pass: an answer is
exact when, teacher-forced on the conversation so far, the argmax at every position of the
answer is the answer's next token and the argmax after it is <|im_end|>. That is precisely the
condition for greedy generation to produce the answer and stop. Seeds are held-out ones
(convgen.eval_seed), distractor prose comes from the held-out split.

Usage: /usr/bin/python3 tools/train/evaluate.py --run tools/train/runs/main [--n 60]
       [--lengths 1024,2048] [--threads 1]
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

import batches
import convgen
from scorer import exact_match


@torch.no_grad()
def recall(model, tok, prose, n, length, level, easy=None, kinds=None, first=0):
    """Per-kind and overall exact recall over held-out seeds first..first+n-1."""
    model.eval()
    count = lambda s: len(tok.encode_plain(s))
    per = {}
    lengths = []
    for i in range(first, first + n):
        kind = kinds[i % len(kinds)] if kinds else None
        conv = convgen.generate(convgen.eval_seed(i), prose, target_tokens=length, level=level,
                                kind=kind, count=count, easy=easy)
        ids, _ = batches.conversation_ids(tok, conv.messages)
        ids = [tok.bos] + ids
        spans = batches.answer_spans(tok, conv.messages)
        ids = ids[:model.cfg.context]
        lengths.append(len(ids))
        x = torch.tensor([ids[:-1]])
        pred = model(x)[0].argmax(-1).tolist()
        for s, e in spans:
            s, e = s + 1, e + 1  # the BOS shifts every position by one
            if e > len(ids):
                continue
            # pred[j] predicts ids[j+1]; answer tokens are ids[s:e] (last one <|im_end|>).
            got = pred[s - 1:e - 1]
            ok = got == ids[s:e]
            # The scorer decides on text (so "4821." and "4821" agree); exactness of tokens
            # implies it, and a mismatch is decoded and checked as text.
            if not ok:
                stop = got.index(tok.im_end) if tok.im_end in got else len(got)
                ok = exact_match(tok.decode(got[:stop]), tok.decode(ids[s:e - 1])) and \
                    tok.im_end in got
            c, t = per.get(conv.kind, (0, 0))
            per[conv.kind] = (c + int(ok), t + 1)
    model.train()
    c = sum(v[0] for v in per.values())
    t = sum(v[1] for v in per.values())
    return {"recall": c / max(t, 1), "questions": t,
            "mean_tokens": round(sum(lengths) / max(len(lengths), 1)),
            "per_kind": {k: round(v[0] / v[1], 3) for k, v in sorted(per.items())}}


@torch.no_grad()
def perplexity(model, ids, T, n_windows):
    """Mean next-token perplexity over n_windows evenly spaced windows of held-out prose."""
    model.eval()
    nll, cnt = 0.0, 0
    step = max(1, (len(ids) - T - 1) // n_windows)
    for k in range(n_windows):
        w = torch.tensor(ids[k * step:k * step + T + 1].astype(np.int64))[None]
        logits = model(w[:, :-1])
        nll += F.cross_entropy(logits[0], w[0, 1:], reduction="sum").item()
        cnt += T
    model.train()
    return math.exp(nll / cnt)


def main():
    from export_gguf import load_checkpoint
    from tok import Tok
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--run", required=True)
    ap.add_argument("--ckpt")
    ap.add_argument("--data", default=None, help="default: RUN/../data")
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--lengths", default="1024,2048")
    ap.add_argument("--level", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    data = a.data or os.path.join(os.path.dirname(a.run.rstrip("/")), "data")
    model, ck = load_checkpoint(a.ckpt or os.path.join(a.run, "ckpt.pt"))
    tok = Tok(os.path.join(data, "tok.model"))
    prose = convgen.Prose(open(os.path.join(data, "heldout.txt"), encoding="utf-8")
                          .read().splitlines())
    held = np.load(os.path.join(data, "heldout_ids.npy"))
    t0 = time.time()
    out = {"step": ck["step"], "tokens": ck["tokens"]}
    for L in [int(x) for x in a.lengths.split(",")]:
        # The generator overshoots its target by up to ~10%; aim below the context so that
        # no question is cut off (mean_tokens reports the real lengths).
        target = int(min(L, model.cfg.context) * 0.9)
        out[f"recall@{L}"] = recall(model, tok, prose, a.n, target, a.level,
                                    kinds=convgen.KINDS)
    out["heldout_ppl@512"] = perplexity(model, held, 512, 32)
    out["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
