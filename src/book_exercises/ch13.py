"""Chapter 13 exercises: bytes for unknown characters, WordPiece, packing sentences into rows.

    from book_exercises import check
    check(byte_fallback, device=device)

The first two are checked against Hugging Face's ``tokenizers`` (a BPE model with
``byte_fallback=True``, as Llama's tokenizer has; BERT's WordPiece model), the third against
first-fit-decreasing packing written here.
"""

from __future__ import annotations

from book_exercises.core import Case, Mistake, exercise

BYTE_TOKENS = [f"<0x{byte:02X}>" for byte in range(256)]


def _as_list(got):
    """A tuple of tokens compared as the list it holds."""
    return list(got) if isinstance(got, tuple) else got


def _tokens_differ(got, expected, case):
    """A wrong list of tokens (or rows): say what was expected."""
    if not isinstance(got, list):
        return f"return a list; got {type(got).__name__}"
    return f"on {case.label}, expected {expected}; got {got}"


# ---------------------------------------------------------------------------------------------
# Exercise 1: byte fallback for characters the vocabulary lacks


def _fallback(text, known, spell=lambda ch: [f"<0x{b:02X}>" for b in ch.encode("utf-8")]):
    return [token for ch in text for token in ([ch] if ch in known else spell(ch))]


def _fallback_cases():
    return [
        Case(("你好☕", {"你", "好"}), "'你好☕' knowing 你 and 好"),
        Case(("汤姆在哪儿？", set("汤姆在儿？")), "'汤姆在哪儿？' without 哪"),
        Case(("a\tb", {"a", "b"}), "'a<tab>b' knowing a and b"),
        Case(("café 😀", set("caf ")), "'café 😀' knowing c, a, f and the space"),
        Case(("他笑了。", set("他笑了。")), "'他笑了。', every character known"),
    ]


@exercise(
    cases=_fallback_cases,
    normalize=_as_list,
    describe=_tokens_differ,
    success="matches Hugging Face's tokenizers (BPE with byte_fallback=True)",
    mistakes=[
        Mistake(
            "a token per UTF-8 byte, not one for the code point: ☕ is U+2615, written with the "
            "three bytes E2 98 95 (ch.encode('utf-8')).",
            lambda text, known: _fallback(text, known, lambda ch: [f"<0x{ord(ch):02X}>"]),
        ),
        Mistake(
            "the bytes of UTF-8, not of UTF-16: ☕ is E2 98 95 in UTF-8 (ch.encode('utf-8')).",
            lambda text, known: _fallback(text, known, lambda ch: [f"<0x{b:02X}>" for b in ch.encode("utf-16-be")]),
        ),
        Mistake(
            "write each byte as two upper-case hex digits, <0xE2> (f'<0x{byte:02X}>'): the 256 "
            "byte tokens of the vocabulary are spelled that way.",
            lambda text, known: _fallback(text, known, lambda ch: [f"<0x{b:02x}>" for b in ch.encode("utf-8")]),
        ),
        Mistake(
            "two hex digits for every byte: the tab is <0x09>, not <0x9> (f'<0x{byte:02X}>').",
            lambda text, known: _fallback(text, known, lambda ch: [f"<0x{b:X}>" for b in ch.encode("utf-8")]),
        ),
        Mistake(
            "only the unknown characters fall back to bytes: the known ones stay one token each.",
            lambda text, known: _fallback(text, set()) if set(text) - set(known) else list(text),
        ),
        Mistake(
            "no character becomes <unk> any more: an unknown one is spelled by its bytes.",
            lambda text, known: [ch if ch in known else "<unk>" for ch in text],
        ),
    ],
)
def byte_fallback(text, known):
    """Known characters as themselves, every other one as its UTF-8 bytes '<0xE2>'."""
    from tokenizers import Tokenizer, models

    vocab = {token: index for index, token in enumerate([*sorted(known), *BYTE_TOKENS])}
    model = models.BPE(vocab=vocab, merges=[], byte_fallback=True, unk_token="<unk>")
    return Tokenizer(model).encode(text).tokens if text else []


# ---------------------------------------------------------------------------------------------
# Exercise 2: WordPiece, greedy longest match first


def _pieces(word, vocab, longest=True, prefix="##", first="", unknown="word"):
    """WordPiece with the typical mistakes as switches: ``longest`` (False: the shortest piece
    first), ``prefix`` of a piece inside the word, ``first`` (the prefix of the first piece),
    ``unknown`` "word" ([UNK] for the word), "piece" (the pieces so far, then [UNK]) or "skip"
    (drop the character and go on)."""
    tokens, start = [], 0
    while start < len(word):
        ends = range(len(word), start, -1) if longest else range(start + 1, len(word) + 1)
        mark = first if start == 0 else prefix
        end = next((end for end in ends if mark + word[start:end] in vocab), None)
        if end is None:
            if unknown == "word":
                return ["[UNK]"]
            if unknown == "piece":
                return [*tokens, "[UNK]"]
            start += 1
            continue
        tokens.append(mark + word[start:end])
        start = end
    return tokens


VOCAB = {
    "un",
    "##aff",
    "##able",
    "##a",
    "##b",
    "##le",
    "a",
    "play",
    "p",
    "##l",
    "##ay",
    "##ing",
    "##s",
    "##in",
    "##g",
    "##er",
    "##ed",
    "u",
    "##n",
    "##y",
    "y",
    "##u",
}


def _wordpiece_cases():
    return [
        Case((word, VOCAB), f"{word!r} with the small vocabulary")
        for word in ("unaffable", "playing", "plays", "played", "unable", "unplayable", "xplay", "playx", "ay", "yuna")
    ]


@exercise(
    cases=_wordpiece_cases,
    normalize=_as_list,
    describe=_tokens_differ,
    success="matches Hugging Face's tokenizers (its WordPiece model)",
    mistakes=[
        Mistake(
            "take the LONGEST piece the vocabulary has at each point (try the end of the word "
            "first, then shorter): 'playing' is play ##ing, not p ##l ##a ##y ##in ##g.",
            lambda word, vocab: _pieces(word, vocab, longest=False),
        ),
        Mistake(
            "a piece that continues a word is looked up with '##' in front: 'playing' is play "
            "##ing, and 'ing' alone is another token (the start of a word).",
            lambda word, vocab: _pieces(word, vocab, prefix=""),
        ),
        Mistake(
            "the first piece of a word has no '##': only the pieces after it do.",
            lambda word, vocab: _pieces(word, vocab, first="##"),
        ),
        Mistake(
            "when no piece fits, the WHOLE word becomes ['[UNK]'], not the pieces found so far followed by [UNK].",
            lambda word, vocab: _pieces(word, vocab, unknown="piece"),
        ),
        Mistake(
            "when no piece fits, the whole word becomes ['[UNK]']: skipping the character loses it without a trace.",
            lambda word, vocab: _pieces(word, vocab, unknown="skip"),
        ),
    ],
)
def wordpiece(word, vocab):
    """BERT's tokens: the longest piece in the vocabulary, then '##' pieces, else [UNK]."""
    from tokenizers import Tokenizer, models

    ids = {token: index for index, token in enumerate(["[UNK]", *sorted(vocab)])}
    return Tokenizer(models.WordPiece(vocab=ids, unk_token="[UNK]")).encode(word).tokens


# ---------------------------------------------------------------------------------------------
# Exercise 3: packing sentences into rows without padding


def _pack_cases():
    return [
        Case(([5, 3, 8, 3, 6, 2, 7, 4], 12), "lengths [5, 3, 8, 3, 6, 2, 7, 4], rows of 12"),
        Case(([4, 4, 4, 4, 4, 4], 12), "six sentences of 4 tokens, rows of 12"),
        Case(([2, 9, 3, 7, 5, 1, 8], 10), "lengths [2, 9, 3, 7, 5, 1, 8], rows of 10"),
        Case(([6, 6, 5, 5, 4, 4, 3, 3], 11), "lengths [6, 6, 5, 5, 4, 4, 3, 3], rows of 11"),
    ]


@exercise(
    cases=_pack_cases,
    normalize=lambda got: [list(row) for row in got] if isinstance(got, (list, tuple)) else got,
    describe=_tokens_differ,
    success="packs as first-fit decreasing does",
    mistakes=[
        Mistake(
            "place the LONGEST sentences first (sorted by length, longest first, ties in index "
            "order): the short ones then fill the gaps they leave.",
            lambda lengths, row_tokens: pack_rows(lengths, row_tokens, order="given"),
        ),
        Mistake(
            "longest first, not shortest: the short sentences are what fills the gaps at the end, so they come last.",
            lambda lengths, row_tokens: pack_rows(lengths, row_tokens, order="shortest"),
        ),
        Mistake(
            "look for room in EVERY row opened so far (the first one with room), not only the "
            "newest: a short sentence can fill a gap left in an earlier row.",
            lambda lengths, row_tokens: pack_rows(lengths, row_tokens, fit="last"),
        ),
        Mistake(
            "a row may be filled exactly: a sentence fits while the row's tokens plus its "
            "length are at most row_tokens (<=, not <).",
            lambda lengths, row_tokens: pack_rows(lengths, row_tokens, strict=True),
        ),
    ],
)
def pack_rows(lengths, row_tokens, order="longest", fit="first", strict=False):
    """First-fit decreasing: longest first, each into the first row with room.

    First-fit decreasing, with the typical mistakes as switches: ``order`` "longest" first,
    "shortest" first or "given"; ``fit`` "first" (the first row with room) or "last" (only the
    newest row); ``strict`` (True: a row must stay below row_tokens)."""
    if any(length > row_tokens for length in lengths):
        longest = max(lengths)
        raise ValueError(f"a sentence of {longest} tokens does not fit a row of {row_tokens}")
    indices = list(range(len(lengths)))
    if order != "given":
        indices.sort(key=lambda i: -lengths[i] if order == "longest" else lengths[i])
    rows, used = [], []
    for index in indices:
        candidates = range(len(rows)) if fit == "first" else range(len(rows))[-1:]
        left = [row_tokens - used[row] - lengths[index] for row in candidates]
        row = next((row for row, room in zip(candidates, left) if (room > 0 if strict else room >= 0)), None)
        if row is None:
            rows.append([])
            used.append(0)
            row = len(rows) - 1
        rows[row].append(index)
        used[row] += lengths[index]
    return rows
