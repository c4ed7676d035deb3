#!/usr/bin/env python3
"""Write the trace of SGLang's tree-evolution figure (Figure 3 of the SGLang
paper; the LMSYS RadixAttention post of 2024-01-17) and pick its capacity.

The nine time points of the figure, as steps of a cache-sim trace:

  (1) the tree is empty                       (no request)
  (2) chat session A, first turn              one new edge under the root
  (3) chat A, second turn                     appended below (2)
  (4) chat session B, first turn              splits A's node at the system prompt
  (5) chat B, second turn                     memory pressure: evicts A's 2nd turn
  (6) a few-shot query                        a new branch under the root
  (7) a batch of few-shot queries             splits (6) at the shared examples
  (8) chat A comes back                       evicts both of B's turns
  (9) self-consistency: several answers to    evicts the other few-shot queries
      the question of one query of (7)

Text is cut into words; a role marker ("User:", "Q:") is glued to the word
after it, so that two messages diverge at their first word as in the figure
(real tokenizers would share the marker and split one token later).

A small reference model of the radix cache (docs/ARCHITECTURE.md rules: a clock per
match/insert, LRU with ties to the node created first, the step semantics of
cache-sim) replays the trace for every capacity; the capacity written to
config.json is the middle of the range that gives exactly the figure's
evictions. The run script then checks `radixkv cache-sim` against them.

Usage: make_trace.py [OUTDIR]   (default: this folder)
"""
import json
import os
import sys

SYSTEM = "You are a helpful assistant."
CHAT_A1 = ["S", "User: Hello!", "Assistant: Hi!"]
CHAT_A2 = CHAT_A1 + [
    "User: Solve this problem: a train leaves at noon and covers 300 km at 100 km/h; "
    "when does it arrive, and how far has it gone by half past one?",
    "Assistant: Sure! At 100 km/h the 300 km take three hours, so the train arrives at "
    "three in the afternoon; by half past one it has run for an hour and a half and "
    "covered 150 km, half of the way."]
CHAT_B1 = ["S", "User: What can you do?",
           "Assistant: I can answer questions, write and explain code, summarise long "
           "texts and help you plan your day."]
QUESTION = "Q: Japan has which city as its capital today? A:"
STEPS = {
    2: [CHAT_A1],
    3: [CHAT_A2],
    4: [CHAT_B1],
    5: [CHAT_B1 + ["User: Write a story.",
                   "Assistant: Once upon a time a small robot lived by the sea. Every "
                   "morning it watched the waves, and one day it found a brush and began "
                   "to paint them, blue on blue and grey on grey, through storms and calm "
                   "days, until the whole town came down to the harbour to see the pictures."]],
    6: [["E", "Q: France has which city as its capital today? A: Paris."]],
    7: [["E", "Q: Japan has which city as its capital today? A: Tokyo."],
        ["E", "Q: Italy has which city as its capital today? A: Rome."],
        ["E", "Q: Spain has which city as its capital today? A: Madrid."]],
    8: [CHAT_A2 + ["User: Thanks!", "Assistant: You are welcome."]],
    9: [["E", QUESTION, "Tokyo, the capital since 1868 and still today."],
        ["E", QUESTION, "It is Tokyo, the largest city of the country."],
        ["E", QUESTION, "Kyoto was the old one; now it is Tokyo."]],
}
EXAMPLES = "Q: What is the capital of Germany? A: Berlin. Q: What is the capital of Egypt? A: Cairo."
MARKERS = ("User:", "Assistant:", "Q:", "A:")

# The figure's evictions, as the edge texts of the evicted nodes, in LRU order.
EXPECTED = {
    5: [["User: Solve this problem:", "Assistant: Sure!"]],       # chat A, turn 2
    8: [["User: Write a story."], ["User: What can you do?"]],    # chat B, both turns
    9: [["Q: France"], ["Q: Italy"], ["Q: Spain"]],               # the other queries
}


def words(text):
    out = []
    for w in text.split():
        if out and out[-1] in MARKERS:
            out[-1] += " " + w
        else:
            out.append(w)
    return out


def expand(parts):
    text = []
    for p in parts:
        text += words(SYSTEM if p == "S" else EXAMPLES if p == "E" else p)
    return text


class Node:
    def __init__(self, tokens, parent, time, nid):
        self.tokens, self.parent, self.time, self.id = tokens, parent, time, nid
        self.children, self.lock = {}, 0


class RefRadix:
    """Reference LRU radix cache, page size 1, written for clarity not speed."""

    def __init__(self):
        self.clock, self.next_id = 0, 1
        self.root = Node([], None, 0, 0)
        self.size = 0

    def _new(self, tokens, parent):
        n = Node(tokens, parent, self.clock, self.next_id)
        self.next_id += 1
        if parent is not None:
            parent.children[tokens[0]] = n
        return n

    def _split(self, child, k):
        pre = self._new(child.tokens[:k], child.parent)
        pre.lock = child.lock
        child.tokens = child.tokens[k:]
        child.parent = pre
        pre.children[child.tokens[0]] = child
        return pre

    def _walk(self, tokens, split):
        node, i = self.root, 0
        while i < len(tokens) and tokens[i] in node.children:
            child = node.children[tokens[i]]
            k = 0
            while k < len(child.tokens) and i + k < len(tokens) and child.tokens[k] == tokens[i + k]:
                k += 1
            child.time = self.clock
            if k < len(child.tokens):
                if not split:
                    return i + k, child, k
                child = self._split(child, k)
            node, i = child, i + k
            if k < len(child.tokens):
                break
        return i, node, None

    def match(self, tokens):
        self.clock += 1
        i, node, _ = self._walk(tokens, True)
        return i, node

    def insert(self, tokens):
        self.clock += 1
        i, node, _ = self._walk(tokens, True)
        if i < len(tokens):
            self._new(tokens[i:], node)
            self.size += len(tokens) - i
        return i

    def lock(self, node, d):
        while node is not None:
            node.lock += d
            node = node.parent

    def leaves(self):
        out, stack = [], [self.root]
        while stack:
            n = stack.pop()
            stack += n.children.values()
            if n is not self.root and not n.children and n.lock == 0:
                out.append(n)
        return out

    def evict(self, want):
        freed, log = 0, []
        while freed < want:
            cands = self.leaves()
            if not cands:
                break
            v = min(cands, key=lambda n: (n.time, n.id))
            del v.parent.children[v.tokens[0]]
            freed += len(v.tokens)
            self.size -= len(v.tokens)
            log.append(v.tokens)
        return log


def replay(steps, capacity):
    """Evictions per step, following the cache-sim contract (P = 1)."""
    t = RefRadix()
    out = {}
    for s, reqs in steps:
        handles = []
        need = 0
        for toks in reqs:
            m, node = t.match(toks[:-1])
            t.lock(node, +1)
            handles.append(node)
            need += len(toks) - m
        short = need - (capacity - t.size)
        if short > 0:
            out[s] = t.evict(short)
            if capacity - t.size < need:
                return None  # locked pages leave a shortfall: not the figure
        for toks in reqs:
            t.insert(toks)
        for node in handles:
            t.lock(node, -1)
    return out


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    vocab, ids = [], {}

    def tok(w):
        if w not in ids:
            ids[w] = len(vocab)
            vocab.append(w)
        return ids[w]

    steps = [(s, [[tok(w) for w in expand(parts)] for parts in STEPS[s]]) for s in sorted(STEPS)]
    # An expected edge is named by words it must contain.

    def agrees(got):
        if got is None or sorted(got) != sorted(EXPECTED):
            return False
        for s, edges in EXPECTED.items():
            if len(got[s]) != len(edges):
                return False
            for toks, want in zip(got[s], edges):
                text = " ".join(vocab[x] for x in toks)
                if not all(w in text for w in want):
                    return False
        return True

    total = sum(len(r) for _, reqs in steps for r in reqs)
    good = [c for c in range(1, total + 1) if agrees(replay(steps, c))]
    if not good:
        sys.exit("make_trace.py: no capacity gives exactly the figure's evictions")
    lo, hi = good[0], good[-1]
    assert good == list(range(lo, hi + 1)), good
    capacity = (lo + hi) // 2
    got = replay(steps, capacity)

    with open(os.path.join(outdir, "trace.jsonl"), "w") as f:
        rid = 0
        for s, reqs in steps:
            for toks in reqs:
                f.write(json.dumps({"id": rid, "step": s, "tokens": toks}) + "\n")
                rid += 1
    with open(os.path.join(outdir, "vocab.json"), "w") as f:
        json.dump(vocab, f, indent=0)
        f.write("\n")
    config = {
        "cache": "radix", "policy": "lru", "page_size": 1, "capacity": capacity,
        "capacity_range": [lo, hi],
        "expected_evictions": {str(s): [" ".join(vocab[x] for x in e) for e in ev]
                               for s, ev in got.items()},
    }
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")
    print(f"capacity {capacity} (figure's evictions for {lo}..{hi}); {total} tokens in the trace")


if __name__ == "__main__":
    main()
