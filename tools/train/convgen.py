"""Seeded generator of multi-turn ChatML conversations that test recall of earlier facts.

Task kinds (after RULER / SCBench):
  single   one fact (a key and its value) stated early, asked after distractor turns
  multikey several facts with distinct keys; several of them asked, in shuffled order
  multival one key gets several values over several turns; asked for all, in the order given
  update   a key's value changes; asked for the latest one
  vartrack chains of variables (X = 4821, Y = X, ...); asked which variables hold a value
  words    word lists over several turns; asked for the three most frequent words
Distractor turns carry real prose from the corpus. A conversation is a list of messages
{"role", "content", "kind"}; kind "answer" marks assistant replies that are scored.

Determinism: every conversation comes from random.Random(seed) alone (plus the prose pool, which
is read in a fixed order), so the same seed always gives the same conversation. Training seeds
are < EVAL_SEED_BASE and held-out evaluation seeds are >= it, so they can never overlap.
"""
import random

EVAL_SEED_BASE = 1 << 40
KINDS = ["single", "multikey", "multival", "update", "vartrack", "words"]

# Level 0 keys and values are short common words (mostly one token each); higher levels add
# names, multi-digit numbers, codes and places, which take several tokens.
EASY_KEYS = ["red", "blue", "green", "gold", "black", "white", "brown", "gray", "pink", "tan",
             "oak", "pine", "elm", "ash", "fig", "plum", "pear", "lime", "corn", "rice",
             "cat", "dog", "fox", "owl", "bee", "ant", "cow", "pig", "hen", "ram", "eel", "elk"]
NAMES = ["Alice", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines",
         "Jonas", "Keiko", "Liam", "Mara", "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Sven",
         "Tara", "Umar", "Vera", "Wendy", "Xavier", "Yusuf", "Zoe", "Amir", "Bianca", "Carlos",
         "Daria", "Emil", "Fiona", "Goran", "Hana", "Igor", "Julia", "Kofi", "Lena", "Marco",
         "Nadia", "Oscar", "Priya", "Rafael", "Sofia", "Tomas", "Ursula", "Viktor", "Yara"]
PLACES = ["Oslo", "Lima", "Cairo", "Quito", "Dakar", "Hanoi", "Perth", "Riga", "Tunis",
          "Kyoto", "Porto", "Lyon", "Basel", "Cork", "Accra", "Baku", "Bergen", "Davos",
          "Graz", "Izmir", "Malmo", "Nantes", "Padua", "Sendai", "Turin", "Utrecht", "Zagreb",
          "Vienna", "Madrid", "Berlin", "Dublin", "Prague", "Warsaw", "Lisbon", "Athens"]
WORDS = ["apple", "river", "stone", "cloud", "candle", "garden", "mirror", "ladder", "anchor",
         "violin", "basket", "lantern", "pepper", "marble", "feather", "harbor", "meadow",
         "copper", "saddle", "thunder", "velvet", "walnut", "barrel", "canyon", "dagger",
         "falcon", "glacier", "hammer", "island", "jacket", "kettle", "lemon", "magnet",
         "needle", "orchard", "pillow", "quartz", "rocket", "silver", "tunnel", "wagon"]
ATTRS = ["code", "room number", "locker", "badge number", "ticket", "pin", "seat", "order number"]
PLACE_ATTRS = ["home town", "office city", "meeting place", "destination"]
VAR_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"

ACKS = ["Noted.", "Got it.", "Understood.", "I will remember that.", "Okay, noted."]
PROSE_ASKS = ["Here is a passage I am reading:", "Please read this text.",
              "Some background for later:", "Consider this excerpt.", "Read this and keep going."]
PROSE_ACKS = ["Thank you, I have read it.", "Done reading.", "I read the passage.", "Okay."]


class Prose:
    """Paragraphs of real text for distractor turns, drawn by the conversation's own rng."""

    def __init__(self, paragraphs):
        self.paras = [p for p in paragraphs if p.strip()]
        if not self.paras:
            raise ValueError("no prose")

    def take(self, rng, n_chars):
        """About n_chars of consecutive paragraphs from a random place, cut at a sentence end."""
        i = rng.randrange(len(self.paras))
        out = []
        total = 0
        while total < n_chars:
            p = self.paras[i % len(self.paras)]
            out.append(p)
            total += len(p) + 1
            i += 1
        text = "\n".join(out)
        if len(text) > n_chars:
            cut = text.rfind(". ", 0, n_chars)
            text = text[: cut + 1] if cut > n_chars // 3 else text[:n_chars].rsplit(" ", 1)[0]
        return text


def _number(rng, level):
    digits = 1 if level == 0 else rng.choice([2, 3, 4] if level == 1 else [3, 4, 5, 6])
    return str(rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10 ** digits))


def _code(rng):
    return "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(2)) + "-" + \
        "".join(rng.choice("0123456789") for _ in range(rng.choice([2, 3])))


def _value(rng, level):
    if level == 0:
        return rng.choice([_number(rng, 0), rng.choice(WORDS), rng.choice(PLACES)])
    return rng.choice([_number(rng, level), _code(rng), rng.choice(PLACES), rng.choice(WORDS)])


def _keys(rng, level, n, easy=None):
    pool = (easy or EASY_KEYS) if level == 0 else NAMES
    return rng.sample(pool, n)


class Conversation:
    """Messages plus bookkeeping; `content` of the answer messages is what the scorer expects."""

    def __init__(self, seed, kind, messages):
        self.seed = seed
        self.kind = kind
        self.messages = messages

    def answers(self):
        return [m["content"] for m in self.messages if m["kind"] == "answer"]


def _fact_turns(rng, kind, level, n_facts, easy=None):
    """(statements, questions): statements are user texts in order; questions are
    (user text, answer text) pairs."""
    st, qs = [], []
    if kind in ("single", "multikey"):
        n = 1 if kind == "single" else n_facts
        keys = _keys(rng, level, n, easy)
        for k in keys:
            v = _value(rng, level)
            if level == 0:
                st.append(f"Remember: {k} is {v}.")
                qs.append((f"What is {k}?", v))
            else:
                attr = rng.choice(ATTRS)
                st.append(f"Remember: the {attr} of {k} is {v}.")
                qs.append((f"What is the {attr} of {k}?", v))
        rng.shuffle(qs)
        if kind == "multikey" and len(qs) > 1:
            qs = qs[: rng.randint(max(1, len(qs) // 2), len(qs))]
    elif kind == "multival":
        n_keys = max(1, n_facts // 3)
        for k in _keys(rng, level, n_keys, easy):
            vals = []
            target = rng.randint(2, 4)
            while len(vals) < target:
                v = _number(rng, level)
                if v not in vals:
                    vals.append(v)
            for v in vals:
                st.append(f"Add {v} to the list of {k}.")
            qs.append((f"Which numbers are on the list of {k}?", ", ".join(vals)))
        rng.shuffle(st)  # the lists interleave; each list keeps its own order below
        # Re-derive each answer in the order the statements now appear.
        order = {}
        for s in st:
            v, k = s[len("Add "):-1].split(" to the list of ")
            order.setdefault(k, []).append(v)
        qs = [(q, ", ".join(order[q[len("Which numbers are on the list of "):-1]]))
              for q, _ in qs]
    elif kind == "update":
        keys = _keys(rng, level, max(1, n_facts // 2), easy)
        events = []
        latest = {}
        for k in keys:
            for _ in range(rng.randint(1, 3)):
                events.append(k)
        rng.shuffle(events)
        for k in events:
            v = rng.choice([p for p in PLACES if p != latest.get(k)])
            if k in latest:
                st.append(f"Update: {k} moved to {v}.")
            else:
                st.append(f"{k} lives in {v}.")
            latest[k] = v
        qs = [(f"Where does {k} live now?", latest[k]) for k in keys]
        rng.shuffle(qs)
    elif kind == "vartrack":
        n_chains = 1 if level == 0 else rng.randint(1, 2)
        names = rng.sample([a + b for a in VAR_LETTERS for b in VAR_LETTERS], 12)
        chains = []
        for _ in range(n_chains):
            v = _number(rng, max(level, 1) + 1)
            length = rng.randint(2, 2 + max(1, n_facts // 2))
            chain = [names.pop() for _ in range(min(length, len(names)))]
            chains.append((v, chain))
        # Emit assignments: each chain in order, chains interleaved at random.
        pos = [0] * len(chains)
        while any(p < len(c[1]) for p, c in zip(pos, chains)):
            i = rng.choice([j for j, (p, c) in enumerate(zip(pos, chains)) if p < len(c[1])])
            v, chain = chains[i]
            name = chain[pos[i]]
            rhs = v if pos[i] == 0 else chain[pos[i] - 1]
            st.append(f"Let {name} = {rhs}.")
            pos[i] += 1
        for v, chain in chains:
            if rng.random() < 0.5:
                qs.append((f"Which variables are equal to {v}?", ", ".join(chain)))
            else:
                qs.append((f"What is the value of {chain[-1]}?", v))
    elif kind == "words":
        pool = rng.sample(WORDS, 10)
        counts = {w: c for w, c in zip(pool[:3], [6, 5, 4])}
        for w in pool[3:]:
            counts[w] = rng.randint(1, 2)
        bag = [w for w, c in counts.items() for _ in range(c)]
        rng.shuffle(bag)
        n_lists = rng.randint(2, 4)
        for i in range(n_lists):
            part = bag[i * len(bag) // n_lists:(i + 1) * len(bag) // n_lists]
            st.append("Word list: " + " ".join(part) + ".")
        qs.append(("Which three words appeared most often in my word lists?",
                   ", ".join(pool[:3])))
    return st, qs


def generate(seed, prose, target_tokens=512, level=0, kind=None, count=None, easy=None):
    """One conversation of roughly target_tokens tokens (count(text) measures a text; by
    default about 4 characters a token). level 0: short keys and values (easy: the key words
    to use, e.g. those that are one token in the trained vocabulary), short turns."""
    rng = random.Random(seed)
    count = count or (lambda s: len(s) // 4 + 1)
    kind = kind or rng.choice(KINDS)
    n_facts = max(2, min(12, target_tokens // (48 if level == 0 else 96)))
    statements, questions = _fact_turns(rng, kind, level, n_facts, easy)

    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": "You are a helpful assistant.",
                     "kind": "system"})
    fact_msgs = []
    for s in statements:
        # Half the acknowledgements repeat the fact: a short-range copy the model learns
        # first, a stepping stone to the long-range lookups the questions need.
        if rng.random() < 0.5:
            ack = {"role": "assistant", "content": "Noted: " + s.replace("Remember: ", ""),
                   "kind": "echo"}
        else:
            ack = {"role": "assistant", "content": rng.choice(ACKS), "kind": "ack"}
        fact_msgs.append([{"role": "user", "content": s, "kind": "fact"}, ack])
    q_msgs = [[{"role": "user", "content": q, "kind": "question"},
               {"role": "assistant", "content": a, "kind": "answer"}] for q, a in questions]

    def cost(pairs):
        return sum(count(m["content"]) + 4 for p in pairs for m in p)

    used = cost(fact_msgs) + cost(q_msgs) + 8
    # Distractor prose fills the rest of the budget, split into turns of varying size.
    distract = []
    left = target_tokens - used
    turn_tokens = 40 if level == 0 else 160
    while left > 24:
        n = min(left - 12, rng.randint(turn_tokens // 2, turn_tokens * 2))
        text = prose.take(rng, n * 4)
        if rng.random() < 0.5:
            pair = [{"role": "user", "content": rng.choice(PROSE_ASKS) + "\n" + text,
                     "kind": "prose"},
                    {"role": "assistant", "content": rng.choice(PROSE_ACKS), "kind": "ack"}]
        else:
            pair = [{"role": "user", "content": "Tell me more.", "kind": "chat"},
                    {"role": "assistant", "content": text, "kind": "prose"}]
        distract.append(pair)
        left -= cost([pair])
    # Facts come first (in order), questions last (in order); distractors are spread over the
    # gaps, with at least one before the first question when there is any.
    seq = [("f", p) for p in fact_msgs]
    gaps = len(seq) + 1
    slots = [[] for _ in range(gaps + len(q_msgs))]
    for d in distract:
        slots[rng.randrange(len(slots))].append(d)
    if distract and not slots[gaps - 1]:
        for s in slots:
            if s:
                slots[gaps - 1].append(s.pop())
                break
    out = list(msgs)
    for i in range(gaps + len(q_msgs)):
        for d in slots[i]:
            out.extend(d)
        if i < len(fact_msgs):
            out.extend(fact_msgs[i])
        elif i >= gaps:
            out.extend(q_msgs[i - gaps])
    return Conversation(seed, kind, out)


def render(messages):
    """ChatML text of the messages (the template exported into the GGUF)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def train_seed(run_seed, index):
    """The index-th training conversation seed of a run; always below EVAL_SEED_BASE."""
    return (run_seed * 1_000_003 + index * 7919 + 17) % EVAL_SEED_BASE


def eval_seed(index):
    return EVAL_SEED_BASE + index
