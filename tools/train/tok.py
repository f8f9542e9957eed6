"""Tokenizer: trains a SentencePiece BPE vocabulary on the corpus and encodes text the way the
engine's SPM tokenizer does (src/tokenizer/spm_encoder.cpp), so training ids equal serving ids.

Why these SentencePiece options:
- model_type=bpe: the engine merges pieces by score (llama.cpp-style SPM), which reproduces
  SentencePiece's BPE encoding, not its unigram Viterbi encoding.
- add_dummy_prefix=False and the GGUF flag add_space_prefix=false: the engine inserts the
  dummy space after every special token, SentencePiece only at the start; with none at all the
  two agree.
- identity normalisation, no whitespace squeezing: the engine does not normalise.
- split_digits: every digit is its own token, so numbers and codes are copied digit by digit.
- byte_fallback: any byte (newline included) has a token, no <unk> at serving time.
- the chat markers are user-defined symbols (single tokens, never split); in the GGUF they are
  typed CONTROL, as chat models mark them, which the engine parses in chat prompts.
"""
import re

import sentencepiece as spm

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")


def train_tokenizer(corpus_path, prefix, vocab_size, sentence_limit=400000):
    spm.SentencePieceTrainer.train(
        input=corpus_path, model_prefix=prefix, vocab_size=vocab_size, model_type="bpe",
        character_coverage=1.0, byte_fallback=True, split_digits=True,
        add_dummy_prefix=False, normalization_rule_name="identity",
        remove_extra_whitespaces=False, user_defined_symbols=SPECIALS,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, input_sentence_size=sentence_limit,
        shuffle_input_sentence=True, max_sentence_length=8192, num_threads=1,
        minloglevel=2)


class Tok:
    def __init__(self, model_path):
        self.sp = spm.SentencePieceProcessor(model_file=model_path)
        self.path = model_path
        self.bos = self.sp.bos_id()
        self.im_start = self.sp.piece_to_id("<|im_start|>")
        self.im_end = self.sp.piece_to_id("<|im_end|>")
        self.eot = self.sp.piece_to_id("<|endoftext|>")
        # What ends a reply, as the engine decides: eos/eot (<|im_end|>) and <|endoftext|>.
        self.stop_ids = {self.im_end, self.eot}

    def __len__(self):
        return self.sp.get_piece_size()

    def encode(self, text):
        """Text with special-token texts parsed (as the engine's chat path does)."""
        out = []
        for frag in _SPLIT.split(text):
            if not frag:
                continue
            if frag in SPECIALS:
                out.append(self.sp.piece_to_id(frag))
            else:
                out.extend(self.sp.encode(frag))
        return out

    def encode_plain(self, text):
        return self.sp.encode(text)

    def decode(self, ids):
        # Decode runs of ordinary ids together (byte-fallback pieces join into UTF-8).
        out, run = [], []
        for i in ids:
            if i in (self.im_start, self.im_end, self.eot):
                out.append(self.sp.decode(run))
                run = []
                out.append(self.sp.id_to_piece(i))
            else:
                run.append(i)
        out.append(self.sp.decode(run))
        return "".join(out)

    def gguf_vocab(self):
        """(tokens, scores, types) with GGUF token types: 1 normal, 2 unknown, 3 control,
        6 byte. The chat markers become CONTROL like in chat models."""
        toks, scores, types = [], [], []
        for i in range(len(self)):
            toks.append(self.sp.id_to_piece(i))
            scores.append(self.sp.get_score(i))
            if self.sp.is_unknown(i):
                t = 2
            elif self.sp.is_control(i) or toks[-1] in SPECIALS:
                t = 3
            elif self.sp.is_byte(i):
                t = 6
            else:
                t = 1
            types.append(t)
        return toks, scores, types
