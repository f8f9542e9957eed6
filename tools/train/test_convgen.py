"""Unit tests of the conversation generator: seeded determinism, disjoint training and
held-out seeds, and answers that follow from the facts stated earlier."""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convgen  # noqa: E402

PROSE = convgen.Prose([
    "The lamp on the corner burned all night, and nobody asked who kept it lit.",
    "A river runs past the mill; in spring it floods the lower field and in autumn it is "
    "low enough to cross on the stones.",
    "She counted the boats in the harbour twice and wrote the number on the back of a card.",
    "Rain came in from the west before noon. The market closed early and the square emptied.",
])


def gen(seed, **kw):
    return convgen.generate(seed, PROSE, **kw)


class GeneratorTest(unittest.TestCase):
    def test_same_seed_same_conversation(self):
        for seed in (0, 1, 12345, convgen.eval_seed(3)):
            for level in (0, 1, 2):
                a = gen(seed, target_tokens=600, level=level)
                b = gen(seed, target_tokens=600, level=level)
                self.assertEqual(a.messages, b.messages)
                self.assertEqual(a.kind, b.kind)

    def test_different_seeds_differ(self):
        texts = {convgen.render(gen(s, target_tokens=400).messages) for s in range(50)}
        self.assertGreater(len(texts), 45)

    def test_training_and_heldout_seeds_are_disjoint(self):
        train = {convgen.train_seed(r, i) for r in range(1, 6) for i in range(20000)}
        held = {convgen.eval_seed(i) for i in range(20000)}
        self.assertFalse(train & held)
        self.assertTrue(all(s < convgen.EVAL_SEED_BASE for s in train))
        # Also at the far end of very long runs.
        self.assertLess(convgen.train_seed(10 ** 6, 10 ** 12), convgen.EVAL_SEED_BASE)

    def test_every_kind_has_answers_after_facts(self):
        for kind in convgen.KINDS:
            for seed in range(20):
                c = gen(seed, target_tokens=800, level=1, kind=kind)
                kinds = [m["kind"] for m in c.messages]
                self.assertIn("answer", kinds)
                self.assertLess(kinds.index("fact"), kinds.index("question"))
                for i, m in enumerate(c.messages):
                    if m["kind"] == "answer":
                        self.assertEqual(c.messages[i - 1]["kind"], "question")

    def facts(self, c):
        return [m["content"] for m in c.messages if m["kind"] == "fact"]

    def qa(self, c):
        return [(c.messages[i - 1]["content"], m["content"])
                for i, m in enumerate(c.messages) if m["kind"] == "answer"]

    def test_single_and_multikey_answers_are_the_stated_values(self):
        for seed in range(30):
            for kind in ("single", "multikey"):
                c = gen(seed, target_tokens=600, level=seed % 2, kind=kind)
                stated = {}
                for f in self.facts(c):
                    m = re.match(r"Remember: (.*) is (.*)\.$", f)
                    stated[m.group(1)] = m.group(2)
                for q, a in self.qa(c):
                    key = re.match(r"What is (.*)\?$", q).group(1)
                    self.assertEqual(stated[key], a)

    def test_update_answer_is_the_latest_value(self):
        for seed in range(30):
            c = gen(seed, target_tokens=600, level=1, kind="update")
            latest = {}
            for f in self.facts(c):
                m = re.match(r"(?:Update: )?(\w+) (?:moved to|lives in) (\w+)\.$", f)
                latest[m.group(1)] = m.group(2)
            for q, a in self.qa(c):
                self.assertEqual(latest[re.match(r"Where does (\w+) live now\?", q).group(1)], a)

    def test_multivalue_answer_keeps_the_order_given(self):
        for seed in range(30):
            c = gen(seed, target_tokens=600, level=1, kind="multival")
            lists = {}
            for f in self.facts(c):
                m = re.match(r"Add (\d+) to the list of (\w+)\.$", f)
                lists.setdefault(m.group(2), []).append(m.group(1))
            for q, a in self.qa(c):
                key = re.match(r"Which numbers are on the list of (\w+)\?", q).group(1)
                self.assertEqual(", ".join(lists[key]), a)

    def test_variable_tracking_follows_the_chain(self):
        for seed in range(30):
            c = gen(seed, target_tokens=600, level=2, kind="vartrack")
            value = {}
            for f in self.facts(c):
                name, rhs = re.match(r"Let (\w+) = (\w+)\.$", f).groups()
                value[name] = value.get(rhs, rhs)
            for q, a in self.qa(c):
                m = re.match(r"What is the value of (\w+)\?", q)
                if m:
                    self.assertEqual(value[m.group(1)], a)
                else:
                    v = re.match(r"Which variables are equal to (\d+)\?", q).group(1)
                    self.assertEqual(sorted(a.split(", ")),
                                     sorted(k for k, x in value.items() if x == v))

    def test_common_words_are_the_three_most_frequent(self):
        for seed in range(20):
            c = gen(seed, target_tokens=600, level=1, kind="words")
            counts = {}
            for f in self.facts(c):
                for w in f[len("Word list: "):-1].split():
                    counts[w] = counts.get(w, 0) + 1
            top = sorted(counts, key=lambda w: -counts[w])[:3]
            self.assertEqual(self.qa(c)[0][1], ", ".join(top))

    def test_length_grows_with_target(self):
        short = len(convgen.render(gen(5, target_tokens=256).messages))
        long = len(convgen.render(gen(5, target_tokens=2048).messages))
        self.assertGreater(long, 3 * short)


if __name__ == "__main__":
    unittest.main()
