"""Unit tests of the shipped evaluation set's writer: held-out seeds that neither training nor
the trainer's own evaluation uses, every kind at every length, and the same rows every time."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convgen  # noqa: E402
import make_eval_set  # noqa: E402
from test_convgen import PROSE  # noqa: E402


class WordTok:
    """Stands in for the trained tokenizer: one token per word."""

    def encode_plain(self, text):
        return text.split()


def rows():
    return list(make_eval_set.conversations(WordTok(), PROSE, per_kind=2, lengths=[256, 512],
                                            level=2, context=2048))


class EvalSetTest(unittest.TestCase):
    def test_seeds_are_held_out_and_beyond_the_trainers_evaluation(self):
        for row in rows():
            self.assertGreaterEqual(row["seed"], convgen.EVAL_SEED_BASE)
            # The trainer evaluates itself on eval_seed(0 .. eval_n - 1), eval_n a few hundred
            # at most; choosing when to stop a stage must never have seen these.
            self.assertGreaterEqual(row["seed"] - convgen.EVAL_SEED_BASE,
                                    make_eval_set.SEED_OFFSET)
        seeds = [r["seed"] for r in rows()]
        self.assertEqual(len(seeds), len(set(seeds)))

    def test_every_kind_at_every_length_with_questions(self):
        got = rows()
        self.assertEqual(len(got), 2 * 2 * len(convgen.KINDS))
        for length in (256, 512):
            target = int(length * 0.9)
            kinds = [r["kind"] for r in got if r["target_tokens"] == target]
            self.assertEqual(sorted(kinds), sorted(convgen.KINDS * 2))
        for r in got:
            answers = [m for m in r["messages"] if m["kind"] == "answer"]
            self.assertTrue(answers)
            for m in answers:
                self.assertEqual(m["role"], "assistant")

    def test_deterministic(self):
        self.assertEqual(rows(), rows())


if __name__ == "__main__":
    unittest.main()
