"""Unit tests of the exact-match scorer."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scorer import exact_match, normalise, score  # noqa: E402


class ScorerTest(unittest.TestCase):
    def test_forgives_only_whitespace_and_one_final_period(self):
        self.assertTrue(exact_match(" 4821.", "4821"))
        self.assertTrue(exact_match("Oslo", "Oslo."))
        self.assertTrue(exact_match("QX,  RT", "QX, RT"))
        self.assertTrue(exact_match("a\nb", "a b"))

    def test_everything_else_is_wrong(self):
        self.assertFalse(exact_match("48 21", "4821"))
        self.assertFalse(exact_match("oslo", "Oslo"))
        self.assertFalse(exact_match("4821 or 4822", "4821"))
        self.assertFalse(exact_match("", "4821"))
        self.assertFalse(exact_match("RT, QX", "QX, RT"))
        self.assertFalse(exact_match("4821..", "4821"))

    def test_score_counts(self):
        self.assertEqual(score([("1", "1"), ("2", "3"), ("x.", "x")]), (2, 3, 2 / 3))
        self.assertEqual(score([]), (0, 0, 0.0))
        self.assertEqual(normalise("  a  b. "), "a b")


if __name__ == "__main__":
    unittest.main()
