"""Chapter 13 exercises: one byte-pair merge step, batches of similar length, encoding a word.

    from book_exercises.ch13 import check_bpe_step
    check_bpe_step(bpe_step)

Every checker calls the reader's function on small fixed inputs (edge cases included: a run of
three equal symbols, a symbol that ends with the first half of the pair, ties between example
lengths, a batch that fills the budget exactly, a word whose characters two merges compete for)
and compares it with transformer_book.subwords (count_pairs, merge_pair, BytePairEncoding) or
transformer_book.batching.length_batches.
"""

from __future__ import annotations

import random
from collections import Counter
from itertools import pairwise

from book_exercises.core import Case, Exercise, Mistake, run
from transformer_book.batching import length_batches
from transformer_book.subwords import (
    BytePairEncoding,
    count_pairs,
    learn_bpe,
    merge_pair,
    read_merges,
    word_symbols,
)

# ---------------------------------------------------------------------------------------------
# Exercise 1: one step of byte-pair encoding


def _merged(symbols, pair, skip=2):
    """merge_pair, with the overlapping mistake as a switch (``skip=1``: after a merge, the
    second symbol of the pair is used again)."""
    out, i = [], 0
    while i < len(symbols):
        if tuple(symbols[i : i + 2]) == tuple(pair):
            out.append(symbols[i] + symbols[i + 1])
            i += skip
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def _replaced(symbols, pair):
    """The str.replace merge: join with spaces, replace "a b" by "ab", split again."""
    return tuple(" ".join(symbols).replace(" ".join(pair), "".join(pair)).split(" "))


def _step(words, weighted=True, merge=merge_pair, keep_counts=True):
    pairs = Counter()
    for symbols, count in words.items():
        for pair in pairwise(symbols):
            pairs[pair] += count if weighted else 1
    best = max(pairs, key=pairs.get)
    merged = Counter()
    for symbols, count in words.items():
        merged[merge(symbols, best)] = count if keep_counts else 1
    return best, merged


def _bpe_step(words):
    pairs = count_pairs(Counter(words))
    best = max(pairs, key=pairs.get)
    return best, Counter({merge_pair(symbols, best): n for symbols, n in words.items()})


def _word_counts(text):
    return Counter(word_symbols(word) for word in text.split())


def _step_cases():
    toy = "low " * 5 + "lower " * 2 + "newest " * 6 + "widest " * 3
    return [
        Case((_word_counts(toy),), "low x5, lower x2, newest x6, widest x3"),
        Case((Counter({("a", "a", "a"): 4, ("b", "a", "a"): 1}),), "('a', 'a', 'a') x4, "
             "('b', 'a', 'a') x1"),
        Case((Counter({("b", "c"): 5, ("ab", "c"): 1}),), "('b', 'c') x5, ('ab', 'c') x1"),
        Case((_word_counts("the cat and the hat sat on that mat " * 2 + "a bat"),),
             "the words of 'the cat and the hat sat on that mat' x2 and 'a bat'"),
    ]


def _as_step(got):
    """The reader's (pair, words): a pair as a tuple, words as a Counter, where possible."""
    if isinstance(got, (tuple, list)) and len(got) == 2:
        pair, words = got
        try:
            pair = tuple(pair)
            words = Counter({tuple(symbols): n for symbols, n in dict(words).items()})
        except (TypeError, ValueError):
            return got
        return pair, words
    return got


def _describe_step(got, expected, case):
    if not (isinstance(got, tuple) and len(got) == 2):
        return "return two values: the most frequent pair and the merged words (a Counter)"
    if got[0] != expected[0]:
        return f"on {case.label}, the most frequent pair is {expected[0]}; got {got[0]}"
    wrong = [symbols for symbols in expected[1] if got[1].get(symbols) != expected[1][symbols]]
    return (f"on {case.label}, the merged words should include {wrong[0]} x{expected[1][wrong[0]]}; "
            f"got {dict(got[1])}")


BPE_STEP = Exercise(
    name="bpe_step",
    task="the most frequent adjacent pair, and the words with it merged.",
    cases=_step_cases,
    reference=_bpe_step,
    normalize=_as_step,
    describe=_describe_step,
    mistakes=[
        Mistake(
            "weight each pair by its word's count: a word seen 5 times adds 5 to each of its "
            "pairs (low x5 makes ('l', 'o') worth 5, not 1).",
            lambda words: _step(words, weighted=False),
        ),
        Mistake(
            "after a merge, skip both symbols of the pair: ('a', 'a', 'a') with the pair "
            "('a', 'a') becomes ('aa', 'a'); merging overlapping pairs gives ('aa', 'aa', 'a').",
            lambda words: _step(words, merge=lambda s, p: _merged(s, p, skip=1)),
        ),
        Mistake(
            "match whole symbols: joining the symbols with spaces and calling str.replace('b c', "
            "'bc') also matches the end of a longer symbol, turning ('ab', 'c') into ('abc',).",
            lambda words: _step(words, merge=_replaced),
        ),
        Mistake(
            "keep each word's count in the merged words: merging changes a word's symbols, not "
            "how often it occurs.",
            lambda words: _step(words, keep_counts=False),
        ),
    ],
)


def check_bpe_step(function, device=None):
    """Check ``function(words: Counter of symbol tuples) -> (pair, merged words)``."""
    return run(BPE_STEP, function, device)


# ---------------------------------------------------------------------------------------------
# Exercise 2: batches of similar length under a token budget


def _buckets(lengths, max_tokens, sort=True, size="longest", strict=True):
    """length_batches(seed=None), with the typical mistakes as switches: ``sort`` (False: the
    examples in their given order), ``size`` "longest", "shortest" (batch size x shortest) or
    "real" (the sum of the lengths), ``strict`` (False: a batch must stay below the budget)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i]) if sort else range(len(lengths))
    batches, batch = [], []
    for index in order:
        candidate = [*batch, index]
        if size == "real":
            slots = sum(lengths[i] for i in candidate)
        else:
            pick = max if size == "longest" else min
            slots = len(candidate) * pick(lengths[i] for i in candidate)
        if batch and (slots > max_tokens if strict else slots >= max_tokens):
            batches.append(batch)
            batch = []
        batch.append(index)
    if batch:
        batches.append(batch)
    return batches


def _length_buckets(lengths, max_tokens):
    return length_batches(lengths, max_tokens, seed=None)


def _bucket_cases():
    rng = random.Random(131)
    sentences = [rng.randint(3, 30) for _ in range(40)]
    return [
        Case(([5, 3, 8, 3, 6, 2, 7, 4], 12), "lengths [5, 3, 8, 3, 6, 2, 7, 4], max_tokens=12"),
        Case(([4, 4, 4, 4, 4, 4], 12), "six examples of 4 tokens, max_tokens=12 (exactly 3 fit)"),
        Case(([9, 1, 1, 1, 1, 1], 9), "lengths [9, 1, 1, 1, 1, 1], max_tokens=9"),
        Case((sentences, 60), "40 lengths from 3 to 30, max_tokens=60"),
    ]


def _describe_buckets(got, expected, case):
    if not isinstance(got, (list, tuple)) or not all(isinstance(b, (list, tuple)) for b in got):
        return "return a list of batches, each a list of example indices"
    got = [list(batch) for batch in got]
    for number, (mine, right) in enumerate(zip(got, expected)):
        if mine != right:
            return f"on {case.label}, batch {number} should be {right}; got {mine}"
    return f"on {case.label}, expected {len(expected)} batches; got {len(got)}"


LENGTH_BUCKETS = Exercise(
    name="length_buckets",
    task="indices sorted by length, cut into batches of at most max_tokens padded slots.",
    cases=_bucket_cases,
    reference=_length_buckets,
    normalize=lambda got: [list(batch) for batch in got] if isinstance(got, (list, tuple)) else got,
    describe=_describe_buckets,
    mistakes=[
        Mistake(
            "a padded batch is as long as its LONGEST example: it holds batch size x longest "
            "slots, not batch size x shortest.",
            lambda lengths, budget: _buckets(lengths, budget, size="shortest"),
        ),
        Mistake(
            "padding counts too: a padded batch holds batch size x longest slots, not the sum "
            "of the examples' lengths (the real tokens).",
            lambda lengths, budget: _buckets(lengths, budget, size="real"),
        ),
        Mistake(
            "sort the examples by length first (ties in index order: sorted() is stable), then "
            "cut: batches of similar lengths are what keeps the padding small.",
            lambda lengths, budget: _buckets(lengths, budget, sort=False),
        ),
        Mistake(
            "a batch may hold exactly max_tokens slots: close it only when the next example "
            "would take it above the budget (>, not >=).",
            lambda lengths, budget: _buckets(lengths, budget, strict=False),
        ),
    ],
)


def check_length_buckets(function, device=None):
    """Check ``function(lengths: list[int], max_tokens: int) -> list of index lists``."""
    return run(LENGTH_BUCKETS, function, device)


# ---------------------------------------------------------------------------------------------
# Exercise 3: encode a word by merge rank


def _encode(word, rank, marker=True, pick="lowest"):
    """BytePairEncoding.encode_word with the typical mistakes as switches: ``marker`` (False:
    no end-of-word marker), ``pick`` "lowest" rank, "highest" rank or "leftmost" pair with a
    rank."""
    symbols = word_symbols(word) if marker else tuple(word)
    while len(symbols) > 1:
        pairs = list(pairwise(symbols))
        if pick == "leftmost":
            best = next((pair for pair in pairs if pair in rank), None)
        else:
            choose = min if pick == "lowest" else max
            best = choose(pairs, key=lambda pair: rank.get(pair, float("inf")))
        if best not in rank:
            break
        symbols = merge_pair(symbols, best)
    return symbols


def _encode_word(word, rank):
    return BytePairEncoding(sorted(rank, key=rank.get)).encode_word(word)


def _encode_cases():
    toy = ["low " * 5 + "lower " * 2 + "newest " * 6 + "widest " * 3]
    toy_rank = {pair: index for index, pair in enumerate(learn_bpe(toy, 10))}
    shipped = {pair: index for index, pair in enumerate(read_merges()[:400])}
    cases = [Case((word, toy_rank), f"{word!r} with the toy corpus's 10 merges")
             for word in ("newest", "nest", "lowest", "low", "x")]
    cases += [Case((word, shipped), f"{word!r} with the first 400 shipped merges")
              for word in ("this", "is", "island", "unbelievable", "Tom")]
    return cases


def _describe_encode(got, expected, case):
    if not isinstance(got, (tuple, list)) or not all(isinstance(s, str) for s in got):
        return "return the word's tokens as a tuple of strings"
    return f"on {case.label}, expected {expected}; got {tuple(got)}"


ENCODE_WORD = Exercise(
    name="encode_word",
    task="a word's tokens: merge the adjacent pair of lowest rank until none has a rank.",
    cases=_encode_cases,
    reference=_encode_word,
    normalize=lambda got: tuple(got) if isinstance(got, list) else got,
    describe=_describe_encode,
    mistakes=[
        Mistake(
            "start from the word's characters with the last one marked: 'low' is ('l', 'o', "
            "'w</w>'), so that a word's end and the inside of a longer word are different tokens.",
            lambda word, rank: _encode(word, rank, marker=False),
        ),
        Mistake(
            "merge the pair of LOWEST rank first: rank 0 is the merge learned first, the most "
            "frequent pair of the training text.",
            lambda word, rank: _encode(word, rank, pick="highest"),
        ),
        Mistake(
            "choose the pair by rank, not by position: in 'nest', ('e', 's') was learned before "
            "('n', 'e'), so it wins although ('n', 'e') comes first.",
            lambda word, rank: _encode(word, rank, pick="leftmost"),
        ),
    ],
)


def check_encode_word(function, device=None):
    """Check ``function(word: str, rank: dict[pair, int]) -> tuple of tokens``."""
    return run(ENCODE_WORD, function, device)


# ---------------------------------------------------------------------------------------------

STUBS = {
    "bpe_step": '''def bpe_step(words):
    """words: a Counter of symbol tuples, e.g. {("l", "o", "w</w>"): 5} -> the most
    frequent adjacent pair (a tie goes to the pair counted first) and a Counter of the
    words with every occurrence of that pair merged, left to right."""
    # Your code here (about 15 lines).
    raise NotImplementedError
''',
    "length_buckets": '''def length_buckets(lengths, max_tokens):
    """Example lengths -> batches of indices: sorted by length (ties in index order),
    cut so that each batch's size x its longest length is at most max_tokens."""
    # Your code here (about 10 lines).
    raise NotImplementedError
''',
    "encode_word": '''def encode_word(word, rank):
    """A word -> its tokens: its characters (the last one marked with "</w>"), then
    merge the adjacent pair of lowest rank, again and again, until no pair has a rank.
    rank maps a pair to its position in the learned merges."""
    # Your code here (about 8 lines; merge_pair from transformer_book.subwords helps).
    raise NotImplementedError
''',
}

SOLUTIONS = {
    "bpe_step": '''def bpe_step(words):
    """words: a Counter of symbol tuples, e.g. {("l", "o", "w</w>"): 5} -> the most
    frequent adjacent pair (a tie goes to the pair counted first) and a Counter of the
    words with every occurrence of that pair merged, left to right."""
    pairs = Counter()
    for symbols, count in words.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += count  # a word seen 5 times adds 5
    best = max(pairs, key=pairs.get)
    merged = Counter()
    for symbols, count in words.items():
        new, i = [], 0
        while i < len(symbols):
            if symbols[i : i + 2] == best:
                new.append(symbols[i] + symbols[i + 1])
                i += 2  # both symbols are used up
            else:
                new.append(symbols[i])
                i += 1
        merged[tuple(new)] = count
    return best, merged
''',
    "length_buckets": '''def length_buckets(lengths, max_tokens):
    """Example lengths -> batches of indices: sorted by length (ties in index order),
    cut so that each batch's size x its longest length is at most max_tokens."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, batch = [], []
    for index in order:
        longest = lengths[index]  # sorted: the newest example is the longest
        if batch and (len(batch) + 1) * longest > max_tokens:
            batches.append(batch)
            batch = []
        batch.append(index)
    if batch:
        batches.append(batch)
    return batches
''',
    "encode_word": '''def encode_word(word, rank):
    """A word -> its tokens: its characters (the last one marked with "</w>"), then
    merge the adjacent pair of lowest rank, again and again, until no pair has a rank.
    rank maps a pair to its position in the learned merges."""
    symbols = (*word[:-1], word[-1] + "</w>")
    while len(symbols) > 1:
        pairs = zip(symbols, symbols[1:])
        best = min(pairs, key=lambda pair: rank.get(pair, float("inf")))
        if best not in rank:
            break  # no pair of the word was ever merged
        symbols = merge_pair(symbols, best)
    return symbols
''',
}

# the solutions' imports, for tests that execute a solution on its own
SOLUTIONS["bpe_step"] = "from collections import Counter\n\n\n" + SOLUTIONS["bpe_step"]
SOLUTIONS["encode_word"] = (
    "from transformer_book.subwords import merge_pair\n\n\n" + SOLUTIONS["encode_word"]
)

CHECKERS = {
    "bpe_step": check_bpe_step,
    "length_buckets": check_length_buckets,
    "encode_word": check_encode_word,
}

QUESTION = (
    "The shipped tokenizer learned 2,000 merges from the English training sentences. What would "
    "change if it learned 200, or 20,000 (as many as the text allows)? Think about the length of "
    "the source sequences, the size of the embedding table, how often each token is seen in "
    "training, and what happens to a word the training text never contained."
)
ANSWER = (
    "Fewer merges (200) leave mostly characters and short pieces: the vocabulary is small and every "
    "token is seen thousands of times, but the sentences get longer (closer to their character "
    "count), so attention has more positions to relate and each token carries less meaning; a new "
    "word is still spelled from pieces. More merges move towards a word vocabulary: sequences "
    "shrink towards one token per word, but the embedding table grows and the rarest tokens are "
    "whole words seen once or twice, whose embeddings are barely trained; with merges until no pair "
    "is left, every training word is one token, and a new word is split into whatever pieces the "
    "merges happen to cover (its characters at worst), exactly the pieces that were seen least. "
    "BPE never produces an unknown token for a word made of known characters, whatever the number "
    "of merges: that is what the number trades against. 2,000 is a point between the two for "
    "about 26,000 short sentences: about 9 tokens a sentence, and few rare tokens; larger corpora "
    "use larger vocabularies (the paper shares 37,000 tokens between English and German)."
)
