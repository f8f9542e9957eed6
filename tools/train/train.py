"""Train the chat model from a seed, resumably, with a recall curriculum.

The same command starts a run or resumes it from RUN/ckpt.pt (written every --ckpt-min
minutes, atomically), so a run can be stopped and resumed; tools/train/run_main.sh runs the long one:
  /usr/bin/python3 tools/train/train.py --run tools/train/runs/main --preset main --lr 1e-3
Logs go to RUN/log.jsonl (one JSON object per line: training rows and eval rows).

Curriculum (why: the field notes show recall is not learned from long random contexts at
first; short contexts with short keys are, and longer ones build on them). A stage moves on when
held-out recall at its length reaches --advance, or after its time cap (training hours, in STAGES):
  stage 0: 256-token conversations, level 0 (short keys/values, many facts, short distractors)
  stage 1: 512 tokens, levels 0/1 mixed
  stage 2: 1024 tokens, level 1/2, some 512
  stage 3: 2048 tokens, level 2, some 1024 (the target length)
A share of every batch (--lm-share) is plain held-in prose for language modelling.
"""
import argparse
import json
import os
import random
import time

import numpy as np
import torch
import torch.nn.functional as F

import batches
import convgen
import evaluate
from model import PRESETS, Model, ModelConfig
from tok import Tok

# (length, [(level, share)], time cap in hours, rows mixed from the previous length)
STAGES = [
    {"T": 256, "levels": [(0, 1.0)], "cap_h": 2.5},
    {"T": 512, "levels": [(0, 0.3), (1, 0.7)], "cap_h": 3.0},
    {"T": 1024, "levels": [(1, 0.5), (2, 0.5)], "cap_h": 4.0, "short": 0.25},
    {"T": 2048, "levels": [(1, 0.3), (2, 0.7)], "cap_h": 1e9, "short": 0.25},
]


STOP = set("that with have this from they which were their there would been when will them "
           "what than then into upon more some only such other your also very shall these "
           "said unto over made could should those must after before where being most".split())


def easy_words(tok, n=300):
    """Common lower-case words of 4-8 letters that are one token ("▁word") in the vocabulary:
    the level-0 keys, so the first recall lessons are single-token lookups. BPE scores rank
    pieces by merge order, i.e. by frequency, so the best-scored are whole common words."""
    cands = []
    for i in range(len(tok)):
        p = tok.sp.id_to_piece(i)
        w = p[1:]
        if p.startswith("▁") and w.isalpha() and w.islower() and 4 <= len(w) <= 8 \
                and w not in STOP:
            cands.append((-tok.sp.get_score(i), w))
    return sorted(w for _, w in sorted(cands)[:n])


# No step takes a minute at these shapes on one core (a few seconds at 1024 tokens).
PAUSE_S = 60.0


def lr_at(step, train_s, a):
    """Linear warm-up, then constant (a run has no planned end); --cooldown-at H starts a
    linear decay to 10% over --cooldown-h hours of training time, for the final model."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    if a.cooldown_at > 0 and train_s > a.cooldown_at * 3600:
        f = min(1.0, (train_s - a.cooldown_at * 3600) / (a.cooldown_h * 3600))
        return a.lr * (1.0 - 0.9 * f)
    return a.lr


def save(path, obj):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="run folder (checkpoint, logs)")
    ap.add_argument("--data", help="prepared data folder (default: RUN/../data)")
    ap.add_argument("--preset", default="main", choices=sorted(PRESETS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--target-every", type=int, default=3,
                    help="every this many evaluations also measure recall at the target "
                         "(1536-token conversations, level 2)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--cooldown-at", type=float, default=0.0,
                    help="training hours after which the learning rate decays (0: never)")
    ap.add_argument("--cooldown-h", type=float, default=2.0)
    ap.add_argument("--batch-tokens", type=int, default=2048)
    ap.add_argument("--lm-share", type=float, default=0.2)
    ap.add_argument("--answer-share", type=float, default=0.0,
                    help="if > 0: the answer tokens' mean loss is this share of the loss, the "
                         "weighted rest the remainder, however much prose a batch holds")
    ap.add_argument("--advance", type=float, default=0.8, help="recall that ends a stage")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0: never)")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--ckpt-min", type=float, default=5.0)
    ap.add_argument("--eval-min", type=float, default=10.0)
    ap.add_argument("--eval-n", type=int, default=24)
    ap.add_argument("--log-every", type=int, default=5)
    ap.add_argument("--stage-scale", type=float, default=1.0,
                    help="multiplies the stage lengths (the tiny self-test uses 0.5)")
    ap.add_argument("--start-stage", type=int, default=0)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    os.makedirs(a.run, exist_ok=True)
    data = a.data or os.path.join(os.path.dirname(a.run.rstrip("/")), "data")
    tok = Tok(os.path.join(data, "tok.model"))
    train_ids = np.load(os.path.join(data, "train_ids.npy"))
    held_ids = np.load(os.path.join(data, "heldout_ids.npy"))
    prose = convgen.Prose(open(os.path.join(data, "train.txt"), encoding="utf-8")
                          .read().splitlines())
    held_prose = convgen.Prose(open(os.path.join(data, "heldout.txt"), encoding="utf-8")
                               .read().splitlines())
    easy = easy_words(tok)
    maker = batches.RowMaker(tok, prose, train_ids, easy)

    ckpt_path = os.path.join(a.run, "ckpt.pt")
    log_path = os.path.join(a.run, "log.jsonl")
    if os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, map_location="cpu")
        cfg = ModelConfig(**ck["model_config"])
        print(f"resuming from {ckpt_path}: step {ck['step']}, stage {ck['stage']}", flush=True)
    else:
        ck = None
        cfg = ModelConfig(**{**PRESETS[a.preset].to_dict(), "vocab": len(tok)})
    torch.manual_seed(a.seed)
    model = Model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95),
                            weight_decay=a.wd)
    st = {"step": 0, "tokens": 0, "examples": 0, "stage": a.start_stage, "train_s": 0.0,
          "stage_s": 0.0, "best_recall": 0.0}
    if ck:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        st = ck["state"]
    else:
        with open(os.path.join(a.run, "config.json"), "w") as f:
            json.dump({"args": vars(a), "model": cfg.to_dict(), "params": model.n_params(),
                       "stages": STAGES}, f, indent=1)
    print(f"model {model.n_params()/1e6:.2f}M params, {cfg}", flush=True)

    def log(row):
        with open(log_path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def checkpoint():
        save(ckpt_path, {"model": model.state_dict(), "opt": opt.state_dict(), "state": st,
                         "model_config": cfg.to_dict(), "step": st["step"],
                         "tokens": st["tokens"], "stage": st["stage"]})

    def run_eval():
        stage = STAGES[st["stage"]]
        T = min(int(stage["T"] * a.stage_scale), cfg.context)
        lvl = max(l for l, _ in stage["levels"])
        t0 = time.time()
        r = evaluate.recall(model, tok, held_prose, a.eval_n, int(T * 0.9), lvl,
                            easy=easy, kinds=convgen.KINDS)
        row = {"eval": True, "step": st["step"], "tokens": st["tokens"],
               "train_s": round(st["train_s"]), "stage": st["stage"], "T": T, "level": lvl,
               "recall": round(r["recall"], 3), "per_kind": r["per_kind"],
               "ppl": round(evaluate.perplexity(model, held_ids, min(256, T), 8), 2),
               "eval_s": round(time.time() - t0, 1)}
        st["evals"] = st.get("evals", 0) + 1
        if st["evals"] % a.target_every == 0:
            L = min(1536, cfg.context - 8)
            t = evaluate.recall(model, tok, held_prose, a.eval_n, L, 2, kinds=convgen.KINDS)
            row["target_recall"] = round(t["recall"], 3)
            row["target_per_kind"] = t["per_kind"]
            row["target_T"] = L
            row["eval_s"] = round(time.time() - t0, 1)
        log(row)
        print(json.dumps(row), flush=True)
        return r["recall"]

    start = time.time()
    last_ckpt = last_eval = time.time()
    acc = {"loss": 0.0, "ans_loss": 0.0, "ans_ok": 0, "ans_n": 0, "n": 0, "tok": 0, "t": 0.0}
    while True:
        if a.max_steps and st["step"] >= a.max_steps:
            break
        if a.minutes and time.time() - start > a.minutes * 60:
            break
        stage = STAGES[st["stage"]]
        T = min(int(stage["T"] * a.stage_scale), cfg.context)
        # One rng per step, from the run seed and step: a resumed run continues the sequence.
        rng = random.Random(a.seed * 1_000_033 + st["step"])
        if st["stage"] > 0 and rng.random() < stage.get("short", 0.0):
            T = min(int(STAGES[st["stage"] - 1]["T"] * a.stage_scale), cfg.context)
        n_rows = max(2, a.batch_tokens // T)  # at least two rows: one is too noisy
        rows = []
        for _ in range(n_rows):
            if rng.random() < a.lm_share:
                rows.append(maker.lm_row(T, rng))
            else:
                lv = rng.choices([l for l, _ in stage["levels"]],
                                 [s for _, s in stage["levels"]])[0]
                rows.append(maker.conv_row(T, convgen.train_seed(a.seed, st["examples"]), lv,
                                           rng))
                st["examples"] += 1
        ids, w = batches.stack(rows)
        x = torch.from_numpy(ids[:, :-1])
        y = torch.from_numpy(ids[:, 1:])
        wt = torch.from_numpy(w)

        t0 = time.time()
        lr = lr_at(st["step"], st["train_s"], a)
        for g in opt.param_groups:
            g["lr"] = lr
        logits = model(x)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                              reduction="none").view_as(wt)
        ans = wt >= batches.ANSWER_W
        if a.answer_share > 0 and bool(ans.any()):
            rest = wt * (~ans)
            loss = a.answer_share * nll[ans].mean() + \
                (1 - a.answer_share) * (nll * rest).sum() / rest.sum().clamp(min=1e-6)
        else:
            loss = (nll * wt).sum() / wt.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.time() - t0
        # A step this long was a pause (the process stopped with SIGSTOP, the machine suspended),
        # not training: count it as an average step so train_s stays the time spent training.
        if dt > PAUSE_S:
            dt = acc["t"] / acc["n"] if acc["n"] else 0.0

        with torch.no_grad():
            acc["ans_ok"] += int((logits.argmax(-1) == y)[ans].sum())
        acc["ans_n"] += int(ans.sum())
        acc["ans_loss"] += float(nll[ans].sum())
        acc["loss"] += float(loss)
        acc["n"] += 1
        acc["tok"] += x.numel()
        acc["t"] += dt
        st["step"] += 1
        st["tokens"] += x.numel()
        st["train_s"] += dt
        st["stage_s"] += dt
        if st["step"] % a.log_every == 0:
            row = {"step": st["step"], "tokens": st["tokens"], "train_s": round(st["train_s"]),
                   "stage": st["stage"], "T": T, "lr": lr,
                   "loss": round(acc["loss"] / acc["n"], 4),
                   "ans_loss": round(acc["ans_loss"] / max(acc["ans_n"], 1), 4),
                   "ans_tok_acc": round(acc["ans_ok"] / max(acc["ans_n"], 1), 3),
                   "tok_s": round(acc["tok"] / acc["t"], 1)}
            log(row)
            print(json.dumps(row), flush=True)
            acc = {k: 0 if isinstance(v, int) else 0.0 for k, v in acc.items()}
        if time.time() - last_eval > a.eval_min * 60:
            r = run_eval()
            last_eval = time.time()
            if st["stage"] < len(STAGES) - 1 and (
                    r >= a.advance or st["stage_s"] > STAGES[st["stage"]]["cap_h"] * 3600):
                # Keep the model that ended each stage (a few MB) for the model card.
                save(os.path.join(a.run, f"stage{st['stage']}-end.pt"),
                     {"model": model.state_dict(), "model_config": cfg.to_dict(),
                      "step": st["step"], "tokens": st["tokens"], "stage": st["stage"]})
                st["stage"] += 1
                st["stage_s"] = 0.0
                log({"advance": True, "step": st["step"], "stage": st["stage"]})
        if time.time() - last_ckpt > a.ckpt_min * 60:
            checkpoint()
            last_ckpt = time.time()
    run_eval()
    checkpoint()
    print("stopped", json.dumps(st), flush=True)


if __name__ == "__main__":
    main()
