"""Print a run's curves from its log.jsonl as a table (for the model card): held-out recall
and perplexity per evaluation, and the mean training loss / answer-token accuracy between them.

Usage: /usr/bin/python3 tools/train/curves.py tools/train/runs/main [more runs...]
"""
import json
import os
import sys


def main():
    for run in sys.argv[1:]:
        print(f"== {run}")
        print(f"{'train_min':>9} {'step':>6} {'tokens':>9} {'stage':>5} {'T':>5} "
              f"{'loss':>6} {'ans_loss':>8} {'ans_acc':>7} {'recall':>6} {'ppl':>7}")
        losses = []
        with open(os.path.join(run, "log.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if "loss" in r:
                    losses.append(r)
                elif r.get("eval"):
                    n = max(len(losses), 1)
                    loss = sum(x["loss"] for x in losses) / n
                    al = sum(x["ans_loss"] for x in losses) / n
                    aa = sum(x["ans_tok_acc"] for x in losses) / n
                    print(f"{r['train_s']/60:9.1f} {r['step']:6d} {r['tokens']:9d} "
                          f"{r['stage']:5d} {r['T']:5d} {loss:6.3f} {al:8.3f} {aa:7.3f} "
                          f"{r['recall']:6.3f} {r['ppl']:7.1f}")
                    losses = []


if __name__ == "__main__":
    main()
