"""Writes the held-out recall set the engine's benchmark scores policies on (data/eval/).

Each line is one conversation from convgen.generate with a held-out seed, its distractor prose
from the held-out split of the corpus:
  {"seed": S, "kind": K, "level": L, "target_tokens": N,
   "messages": [{"role": ..., "content": ..., "kind": ...}, ...]}
An assistant message of kind "answer" is what a greedy reply to the question before it must
be (scorer.py's exact match; the engine's evaluation/recall_set.h applies the same rule).

Seeds: convgen.eval_seed(SEED_OFFSET + i). They are >= convgen.EVAL_SEED_BASE, so never a
training seed, and above the few hundred the trainer evaluates itself on while it trains, so
choosing when to stop a stage never looked at them.

Usage: /usr/bin/python3 tools/train/make_eval_set.py --data tools/train/runs/data \
           --out data/eval/recall-heldout.jsonl [--per-kind 8] [--lengths 1024,2048]
"""
import argparse
import json
import os

import convgen
from tok import Tok

SEED_OFFSET = 1_000_000


def conversations(tok, prose, per_kind, lengths, level, context):
    """per_kind conversations of every kind at every length, in a fixed order."""
    count = lambda s: len(tok.encode_plain(s))
    i = 0
    for length in lengths:
        # The generator overshoots its target by up to ~10%: aim below the context.
        target = int(min(length, context) * 0.9)
        for _ in range(per_kind):
            for kind in convgen.KINDS:
                seed = convgen.eval_seed(SEED_OFFSET + i)
                i += 1
                conv = convgen.generate(seed, prose, target_tokens=target, level=level, kind=kind,
                                        count=count)
                yield {"seed": seed, "kind": conv.kind, "level": level, "target_tokens": target,
                       "messages": conv.messages}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="prepare_data.py's output (tok.model, "
                    "heldout.txt)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-kind", type=int, default=8, help="conversations per kind and length")
    ap.add_argument("--lengths", default="1024,2048", help="conversation lengths in tokens")
    ap.add_argument("--level", type=int, default=2, help="convgen's difficulty level")
    ap.add_argument("--context", type=int, default=2048, help="the model's context")
    a = ap.parse_args()
    tok = Tok(os.path.join(a.data, "tok.model"))
    prose = convgen.Prose(open(os.path.join(a.data, "heldout.txt"), encoding="utf-8")
                          .read().splitlines())
    lengths = [int(x) for x in a.lengths.split(",")]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    n = 0
    with open(a.out, "w", encoding="utf-8") as f:
        for row in conversations(tok, prose, a.per_kind, lengths, a.level, a.context):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    print(f"{n} conversations -> {a.out}")


if __name__ == "__main__":
    main()
