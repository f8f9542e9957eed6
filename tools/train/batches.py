"""Turns conversations and prose into (ids, loss weights) training rows.

Loss weights say what the model should learn most from: the scored answer tokens (and the
<|im_end|> that ends them, so it learns to stop) weigh ANSWER_W; stated facts and questions 1;
predictable chat scaffolding and distractor prose less, so that the gradient is not dominated
by text that has nothing to do with recall (the failure recorded in the field notes).
"""
import numpy as np

import convgen

ANSWER_W = 5.0
WEIGHTS = {"answer": ANSWER_W, "fact": 1.0, "question": 1.0, "system": 0.1, "ack": 0.2,
           "echo": 1.0,
           "chat": 0.2, "prose": 0.3}
HEAD_W = 0.05   # "<|im_start|>role\n": nearly free to predict
PAD_PROSE_W = 0.5


def conversation_ids(tok, messages):
    """ids and per-token weights of the rendered ChatML conversation, encoded per fragment
    exactly as the engine splits the rendered text at special tokens."""
    ids, w = [], []
    nl = tok.encode_plain("\n")
    for m in messages:
        head = [tok.im_start] + tok.encode_plain(m["role"] + "\n")
        body = tok.encode_plain(m["content"])
        kw = WEIGHTS[m["kind"]]
        ids += head + body + [tok.im_end] + nl
        w += [HEAD_W] * len(head) + [kw] * len(body)
        w += [ANSWER_W if m["kind"] == "answer" else 0.2] + [0.05] * len(nl)
    return ids, w


def answer_spans(tok, messages):
    """(start, end) index ranges (in conversation_ids coordinates) of every scored answer,
    the closing <|im_end|> included."""
    spans, pos = [], 0
    nl = len(tok.encode_plain("\n"))
    for m in messages:
        head = 1 + len(tok.encode_plain(m["role"] + "\n"))
        body = len(tok.encode_plain(m["content"]))
        if m["kind"] == "answer":
            spans.append((pos + head, pos + head + body + 1))
        pos += head + body + 1 + nl
    return spans


class RowMaker:
    """Makes rows of length T+1 (inputs are row[:-1], targets row[1:])."""

    def __init__(self, tok, prose, train_ids, easy_words):
        self.tok = tok
        self.prose = prose
        self.ids = train_ids
        self.easy = easy_words
        self.count = lambda s: len(tok.encode_plain(s))

    def lm_row(self, T, rng):
        start = rng.randint(0, len(self.ids) - T - 1)
        ids = [self.tok.bos] + self.ids[start:start + T].tolist()
        return ids, [1.0] * T

    def conv_row(self, T, seed, level, rng):
        conv = convgen.generate(seed, self.prose, target_tokens=int(T * 0.9), level=level,
                                count=self.count, easy=self.easy)
        ids, w = conversation_ids(self.tok, conv.messages)
        ids = [self.tok.bos] + ids
        # w[i] weighs predicting ids[i+1]; the BOS is never predicted.
        if len(ids) < T + 1:
            fill = T + 1 - len(ids)
            start = rng.randint(0, len(self.ids) - fill - 1)
            ids += [self.tok.eot] + self.ids[start:start + fill - 1].tolist()
            w += [0.0] + [PAD_PROSE_W] * (fill - 1)
        return ids[:T + 1], w[:T]


def stack(rows):
    ids = np.asarray([r[0] for r in rows], dtype=np.int64)
    w = np.asarray([r[1] for r in rows], dtype=np.float32)
    return ids, w
