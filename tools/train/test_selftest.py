"""End-to-end self-test of the recipe at tiny size (seconds): tokenizer, training steps (the
loss must fall), GGUF export, and the engine loading the file and producing the same greedy
tokens (and tokenisation) as the PyTorch model.

Uses the prepared corpus (runs/data/train.txt) when present, else a few built-in paragraphs,
so it also runs where the text packages are not installed. The engine is $TANGRAM_BINARY (CTest
sets it, and then its checks always run), else build/release/tangram, whose checks are skipped
when it has not been built.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import batches  # noqa: E402
import convgen  # noqa: E402

ENGINE = os.environ.get("TANGRAM_BINARY") or os.path.join(HERE, "..", "..", "build", "release",
                                                          "tangram")
FALLBACK = [
    "The lamp on the corner burned all night, and nobody asked who kept it lit.",
    "A river runs past the mill; in spring it floods the lower field and in autumn it is low "
    "enough to cross on the stones.",
    "She counted the boats in the harbour twice and wrote the number on the back of a card.",
    "Rain came in from the west before noon. The market closed early and the square emptied.",
    "He kept his tools in a wooden box with a brass hinge, each wrapped in an oiled cloth.",
] * 40


def prose_paragraphs():
    path = os.path.join(HERE, "runs", "data", "train.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return [next(f).rstrip("\n") for _ in range(1500)]
    return FALLBACK


class SelfTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        torch.set_num_threads(1)
        from prepare_data import finish
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.data = os.path.join(cls.tmp.name, "data")
        os.makedirs(d)
        paras = prose_paragraphs()
        prose = convgen.Prose(paras)
        # The tokenizer also sees rendered conversations so chat words get pieces.
        convs = [convgen.render(convgen.generate(s, prose, 300, level=s % 3).messages)
                 for s in range(200)]
        with open(os.path.join(d, "train.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(paras[100:] + [c.replace("\n", " ") for c in convs]) + "\n")
        with open(os.path.join(d, "heldout.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(paras[:100]) + "\n")
        finish(d, 700)
        cls.run_dir = os.path.join(cls.tmp.name, "run")
        cmd = [sys.executable, os.path.join(HERE, "train.py"), "--run", cls.run_dir,
               "--data", d, "--preset", "tiny", "--max-steps", "60", "--lr", "3e-3",
               "--warmup", "5", "--batch-tokens", "1024", "--stage-scale", "0.5",
               "--log-every", "5", "--eval-n", "2", "--threads", "1"]
        cls.train_out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_loss_falls(self):
        self.assertEqual(self.train_out.returncode, 0, self.train_out.stderr[-2000:])
        with open(os.path.join(self.run_dir, "log.jsonl")) as f:
            rows = [json.loads(l) for l in f]
        losses = [r["loss"] for r in rows if "loss" in r]
        self.assertGreater(len(losses), 5)
        self.assertLess(losses[-1], losses[0] - 0.5, losses)

    def test_resume_continues_from_checkpoint(self):
        self.assertEqual(self.train_out.returncode, 0, self.train_out.stderr[-2000:])
        out = subprocess.run(
            [sys.executable, os.path.join(HERE, "train.py"), "--run", self.run_dir, "--data",
             self.data, "--preset", "tiny", "--max-steps", "65", "--log-every", "5",
             "--eval-n", "1", "--stage-scale", "0.5", "--batch-tokens", "512"],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        self.assertIn("resuming from", out.stdout)
        self.assertIn('"step": 65', out.stdout)

    def test_fragment_encoding_equals_rendered_encoding(self):
        from tok import Tok
        tok = Tok(os.path.join(self.data, "tok.model"))
        prose = convgen.Prose(prose_paragraphs())
        for s in range(20):
            c = convgen.generate(s, prose, 400, level=s % 3)
            ids, w = batches.conversation_ids(tok, c.messages)
            self.assertEqual(ids, tok.encode(convgen.render(c.messages)))
            self.assertEqual(len(ids), len(w))
            for (a, b), ans in zip(batches.answer_spans(tok, c.messages), c.answers()):
                self.assertEqual(tok.decode(ids[a:b - 1]), ans)
                self.assertEqual(ids[b - 1], tok.im_end)

    @unittest.skipUnless(os.path.exists(ENGINE), "engine not built")
    def test_engine_loads_gguf_and_matches_greedy_tokens(self):
        import torch
        from export_gguf import export, load_checkpoint
        from tok import Tok
        self.assertEqual(self.train_out.returncode, 0, self.train_out.stderr[-2000:])
        tok = Tok(os.path.join(self.data, "tok.model"))
        model, _ = load_checkpoint(os.path.join(self.run_dir, "ckpt.pt"))
        model.eval()
        path = os.path.join(self.tmp.name, "tiny-f32.gguf")
        export(model, tok, path)

        prompt = "Remember: the code of Alice is 4821. The river ran past the mill and"
        ids = tok.encode(prompt)
        r = subprocess.run([ENGINE, "tokenize", "-m", path, "--ids", "--add-special", "-p",
                            prompt], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([int(x) for x in r.stdout.split()], [tok.bos] + ids)

        seq = [tok.bos] + ids
        gen = []
        with torch.no_grad():
            for _ in range(16):
                nxt = int(model(torch.tensor([seq]))[0, -1].argmax())
                if nxt in tok.stop_ids:
                    break
                gen.append(nxt)
                seq.append(nxt)
        self.assertGreater(len(gen), 0, "the tiny model stopped at once: nothing compared")
        r = subprocess.run([ENGINE, "run", "-m", path, "-p", prompt, "-n", "16", "--temp", "0",
                            "--kv-type", "f32", "-t", "1", "-q"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        engine_text = r.stdout[len(prompt):].rstrip("\n") if r.stdout.startswith(prompt) \
            else r.stdout
        self.assertEqual(engine_text, tok.decode(gen), (gen, r.stdout))

    @unittest.skipUnless(os.path.exists(ENGINE), "engine not built")
    def test_engine_logits_match_trainer(self):
        """Teacher-forced mean NLL of held-out text: `tangram perplexity` (windows of W
        positions, the first replaced by BOS, as llama-perplexity) against the same windows
        in PyTorch. Equal NLL to 1e-3 nats means the logits agree."""
        import math
        import torch
        import torch.nn.functional as F
        from export_gguf import export, load_checkpoint
        from tok import Tok
        self.assertEqual(self.train_out.returncode, 0, self.train_out.stderr[-2000:])
        tok = Tok(os.path.join(self.data, "tok.model"))
        model, _ = load_checkpoint(os.path.join(self.run_dir, "ckpt.pt"))
        model.eval()
        path = os.path.join(self.tmp.name, "tiny-logits.gguf")
        export(model, tok, path)
        text_path = os.path.join(self.tmp.name, "held.txt")
        with open(os.path.join(self.data, "heldout.txt"), encoding="utf-8") as f:
            text = f.read()[:2500]
        with open(text_path, "w", encoding="utf-8") as f:
            f.write(text)
        W = 128
        r = subprocess.run([ENGINE, "perplexity", "-m", path, "-f", text_path, "-c", str(W),
                            "-t", "1", "--kv-type", "f32", "--json"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        engine_nll = json.loads(r.stdout)["mean_nll"]
        stream = [tok.bos] + tok.encode_plain(text)
        nll, n = 0.0, 0
        with torch.no_grad():
            for k in range(len(stream) // W):
                w = [tok.bos] + stream[W * k + 1:W * k + W]
                logits = model(torch.tensor([w[:-1]]))[0]
                nll += F.cross_entropy(logits, torch.tensor(w[1:]), reduction="sum").item()
                n += W - 1
        self.assertGreater(n, 0)
        self.assertAlmostEqual(engine_nll, nll / n, delta=1e-3)
        self.assertTrue(math.isfinite(engine_nll))


if __name__ == "__main__":
    unittest.main()
