# This file is generated from book/13_tokens_from_text.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Subword tokens: byte-pair encoding from scratch for English, characters for
Chinese, and vocabularies with an unknown token (chapter 13)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from importlib.resources import files
from itertools import pairwise
from pathlib import Path

import torch

from transformer_book.tasks import Vocabulary

# a run of letters and digits, or a run of punctuation; spaces separate, and vanish
WORD = re.compile(r"\w+|[^\w\s]+")
END_OF_WORD = "</w>"


def pre_tokenize(sentence: str) -> list[str]:
    """Split a sentence into words and punctuation marks.

    "Tom's here." -> ["Tom", "'", "s", "here", "."]
    """
    return WORD.findall(sentence)


def word_symbols(word: str) -> tuple[str, ...]:
    """ "cat" -> ("c", "a", "t</w>"): its characters, the last one marked as the end."""
    return (*word[:-1], word[-1] + END_OF_WORD)


def count_pairs(words: Counter) -> Counter:
    """How often each pair of adjacent symbols occurs, over words and their counts."""
    pairs = Counter()
    for symbols, count in words.items():
        for pair in pairwise(symbols):  # (s0, s1), (s1, s2), ...
            pairs[pair] += count
    return pairs


def merge_pair(symbols: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    """Merge each ``pair`` in ``symbols`` into one symbol, left to right."""
    merged, i = [], 0
    while i < len(symbols):
        if symbols[i : i + 2] == pair:
            merged.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return tuple(merged)


def learn_bpe(
    sentences: Iterable[str],
    num_merges: int,
    split: Callable[[str], list[str]] = pre_tokenize,
    spell: Callable[[str], tuple[str, ...]] = word_symbols,
) -> list[tuple[str, str]]:
    """Count adjacent pairs, merge the most frequent, repeat: the merges in order.

    A tie goes to the pair counted first. Stops early if no pair is left. ``split``
    cuts a sentence into words and ``spell`` writes a word as its first symbols (the
    optional section on bytes changes both).
    """
    if num_merges < 0:
        raise ValueError(f"num_merges must be >= 0; got {num_merges}")
    words = Counter(spell(w) for s in sentences for w in split(s))
    merges = []
    for _ in range(num_merges):
        pairs = count_pairs(words)
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        merges.append(best)
        words = Counter({merge_pair(symbols, best): n for symbols, n in words.items()})
    return merges


class BytePairEncoding:
    """English text -> subword tokens, with merges learned by ``learn_bpe``.

    A word's symbols are merged lowest-ranked pair first (the pair learned earliest).
    When no two merges make the same token (the shipped 2,000 make 2,000 different
    ones), that gives the same tokens as applying every merge in the order learned.
    """

    def __init__(
        self,
        merges: Sequence[tuple[str, str]],
        split: Callable[[str], list[str]] = pre_tokenize,
        spell: Callable[[str], tuple[str, ...]] = word_symbols,
    ):
        self.split, self.spell = split, spell  # as given to learn_bpe
        self.merges = [tuple(pair) for pair in merges]
        self.rank = {pair: rank for rank, pair in enumerate(self.merges)}
        self._cache: dict[str, tuple[str, ...]] = {}

    def encode_word(self, word: str) -> tuple[str, ...]:
        if word not in self._cache:
            symbols = self.spell(word)
            while len(symbols) > 1:
                pairs = pairwise(symbols)
                best = min(pairs, key=lambda pair: self.rank.get(pair, len(self.rank)))
                if best not in self.rank:
                    break
                symbols = merge_pair(symbols, best)
            self._cache[word] = symbols
        return self._cache[word]

    def tokenize(self, sentence: str) -> list[str]:
        """Split a sentence into subword tokens.

        "Tom's here." -> ["Tom</w>", "'</w>", "s</w>", "here</w>", ".</w>"]
        """
        return [token for w in self.split(sentence) for token in self.encode_word(w)]


MERGES_FILE = "tatoeba_en_merges.txt"  # in transformer_book/data/


def read_merges(path: str | Path | None = None) -> list[tuple[str, str]]:
    """Read byte-pair merges from a file of "left right" lines, in order.

    Merges from a file of "left right" lines, in order (default: the 2,000 merges
    the package ships: ``learn_bpe`` on the English side of the Tatoeba training split,
    written by tools/train_translator.py)."""
    if path is None:
        name = MERGES_FILE
        text = (files("transformer_book") / "data" / MERGES_FILE).read_text("utf-8")
    else:
        name, text = Path(path).name, Path(path).read_text(encoding="utf-8")
    merges = []
    for number, line in enumerate(text.splitlines(), start=1):
        pair = tuple(line.split(" "))
        if len(pair) != 2 or not all(pair):
            raise ValueError(
                f"{name}, line {number}: expected two symbols separated by one space; "
                f"got {line!r}"
            )
        merges.append(pair)
    return merges


class SubwordVocabulary(Vocabulary):
    """Tokens <-> ids: "<pad>" 0, "<s>" 1, "</s>" 2, "<unk>" 3, then the tokens.

    A token that is not in the vocabulary encodes as "<unk>"."""

    specials = ("<pad>", "<s>", "</s>", "<unk>")

    def decode(self, ids: Iterable[int] | torch.Tensor) -> list[str]:
        """The tokens of ``ids``: stops at the first "</s>", skips "<pad>" and "<s>"."""
        return self.decode_tokens(ids)


def english_vocabulary(
    sentences: Iterable[str], merges: Sequence[tuple]
) -> SubwordVocabulary:
    """Every symbol of the sentences' words, then every merged token, in merge order."""
    sentences = list(sentences)
    words = {word for sentence in sentences for word in pre_tokenize(sentence)}
    alphabet = sorted({symbol for word in words for symbol in word_symbols(word)})
    merged = [left + right for left, right in merges]
    # two merges can give one token
    return SubwordVocabulary(dict.fromkeys(alphabet + merged))


def _byte_table() -> tuple[str, ...]:
    """GPT-2's printable stand-in for each of the 256 bytes (index = byte)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [byte for byte in range(256) if byte not in printable]
    stand_in = {byte: chr(0x100 + n) for n, byte in enumerate(others)}
    return tuple(chr(b) if b in printable else stand_in[b] for b in range(256))


BYTE_SYMBOLS = _byte_table()  # BYTE_SYMBOLS[32] == "Ġ", the space
BYTE_OF = {symbol: byte for byte, symbol in enumerate(BYTE_SYMBOLS)}
# a word keeps the one space before it; a run of spaces left over is a word too
SPACED_WORD = re.compile(r" ?\w+| ?[^\w\s]+|\s+(?!\S)|\s+")


def pre_tokenize_bytes(sentence: str) -> list[str]:
    """Split a sentence into words that keep the space before them (GPT-2's way).

    "Tom's here." -> ["Tom", "'", "s", " here", "."]; joined, they are the sentence.
    """
    return SPACED_WORD.findall(sentence)


def byte_symbols(word: str) -> tuple[str, ...]:
    """ " café" -> ("Ġ", "c", "a", "f", "Ã", "©"): one symbol per UTF-8 byte."""
    return tuple(BYTE_SYMBOLS[byte] for byte in word.encode("utf-8"))


def text_from_bytes(tokens: Iterable[str]) -> str:
    """Byte-level tokens -> the text they spell (bytes that are not UTF-8 give "�")."""
    raw = bytearray()
    for token in tokens:
        for symbol in token:
            if symbol not in BYTE_OF:
                raise ValueError(
                    f"token {token!r} holds {symbol!r}, which is not one of the 256 "
                    "byte symbols (BYTE_SYMBOLS)"
                )
            raw.append(BYTE_OF[symbol])
    return raw.decode("utf-8", errors="replace")


def chinese_vocabulary(sentences: Iterable[str]) -> SubwordVocabulary:
    """Every character of the sentences, the most frequent first."""
    counts = Counter(character for sentence in sentences for character in sentence)
    by_frequency = sorted(counts, key=lambda character: (-counts[character], character))
    return SubwordVocabulary(by_frequency)
