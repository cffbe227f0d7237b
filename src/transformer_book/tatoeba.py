# This file is generated from book/13_tokens_from_text.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Real sentences: the Tatoeba English-Chinese pairs shipped with the package, and
their fixed split into train, dev and test (chapter 13)."""

from __future__ import annotations

import functools
import itertools
import lzma
import random
import re
import unicodedata
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

DATA_FILE = "tatoeba_cmn.tsv.xz"  # in transformer_book/data/, with its README
ATTRIBUTION = "CC-BY 2.0 (France) Attribution: tatoeba.org #"
SPLIT_SEED = 0
SPLIT_SIZES = {"test": 1000, "dev": 500}  # English sentences; "train" has the rest


@dataclass(frozen=True)
class SentencePair:
    english: str
    chinese: str
    attribution: str  # both sentences' Tatoeba ids and contributors


def read_lines(path: str | Path | None, shipped: str) -> tuple[str, list[str]]:
    """The name and the lines of an xz-compressed UTF-8 file (default: the package's
    data file ``shipped``)."""
    if path is None:
        name, raw = shipped, (files("transformer_book") / "data" / shipped).read_bytes()
    else:
        name, raw = Path(path).name, Path(path).read_bytes()
    try:
        text = lzma.decompress(raw).decode("utf-8")
    except (lzma.LZMAError, UnicodeDecodeError) as error:
        raise ValueError(f"{name} is not xz-compressed UTF-8 text ({error})") from None
    return name, text.splitlines()


def read_pairs(path: str | Path | None = None) -> list[SentencePair]:
    """Every line of an xz-compressed data file (default: the one the package ships).

    A line is English, Chinese and an attribution, separated by TABs; a file with any
    other line is refused, naming the line.
    """
    name, lines = read_lines(path, DATA_FILE)
    pairs = []
    for number, line in enumerate(lines, start=1):
        columns = line.split("\t")
        if (
            len(columns) != 3
            or not all(column.strip() for column in columns)
            or not columns[2].startswith(ATTRIBUTION)
        ):
            raise ValueError(
                f"{name}, line {number}: expected English, Chinese and a Tatoeba "
                f"attribution, separated by TABs; got {line[:80]!r}"
            )
        pairs.append(SentencePair(*columns))
    return pairs


@functools.cache
def _translations() -> dict[str, tuple[str, ...]]:
    """English sentence -> its Chinese translations, in the file's order."""
    grouped: dict[str, list[str]] = {}
    for pair in read_pairs():
        grouped.setdefault(pair.english, []).append(pair.chinese)
    return {english: tuple(chinese) for english, chinese in grouped.items()}


# Contractions written out, so that "I've" and "I have" get the same key. The
# ambiguous ones ('d: would or had; 's: is, has or a possessive) give one reading each.
CONTRACTIONS = [
    (r"\bwon't\b", ["will not"]),
    (r"\bcan't\b", ["can not"]),
    (r"\bshan't\b", ["shall not"]),
    (r"\blet's\b", ["let us"]),
    (r"n't\b", [" not"]),
    (r"'re\b", [" are"]),
    (r"'m\b", [" am"]),
    (r"'ll\b", [" will"]),
    (r"'ve\b", [" have"]),
    (r"'d\b", [" would", " had"]),
    (r"'s\b", [" is", " has", "s"]),
]


def bare(text: str) -> str:
    """Text in NFKC, lower case, with everything but letters and digits removed."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).lower())


def english_keys(sentence: str) -> set[str]:
    """The normalised forms of an English sentence, one per reading of its contractions.

    "I've lost my watch." -> {"ihavelostmywatch"}: case, punctuation and spaces do not
    count, and contractions are written out.
    """
    readings = [unicodedata.normalize("NFKC", sentence).lower().replace("\u2019", "'")]
    for pattern, expansions in CONTRACTIONS:
        expanded = []
        for text in readings:
            first, *rest = re.split(pattern, text)
            for choice in itertools.product(expansions, repeat=len(rest)):
                pieces = (word + piece for word, piece in zip(choice, rest))
                expanded.append(first + "".join(pieces))
        readings = expanded
    return {bare(text) for text in readings}


@functools.cache
def twin_groups() -> tuple[tuple[str, ...], ...]:
    """The English sentences in groups of near-twins (each group and the groups sorted).

    Two sentences are twins when they share a normalised form (``english_keys``) or a
    translation that is the same once ``bare``; a twin of a twin joins the group.
    """
    translations = _translations()
    parent = {english: english for english in translations}  # union-find

    def root(english: str) -> str:
        while parent[english] != english:
            english = parent[english]
        return english

    first_with: dict[tuple[str, str], str] = {}  # a key -> the first sentence with it
    for english in sorted(translations):
        keys = {("en", key) for key in english_keys(english)}
        keys |= {("zh", bare(chinese)) for chinese in translations[english]}
        for key in sorted(keys):
            one, other = root(first_with.setdefault(key, english)), root(english)
            parent[max(one, other)] = min(one, other)
    groups: dict[str, list[str]] = {}
    for english in sorted(translations):
        groups.setdefault(root(english), []).append(english)
    return tuple(sorted(tuple(group) for group in groups.values()))


@functools.cache
def _split_sentences(by: str) -> dict[str, tuple[str, ...]]:
    if by == "sentence":  # each English sentence on its own
        groups = [(english,) for english in sorted(_translations())]
    else:
        groups = list(twin_groups())
    random.Random(SPLIT_SEED).shuffle(groups)
    chosen: dict[str, list[str]] = {"test": [], "dev": [], "train": []}
    for group in groups:  # test, then dev, filled to their sizes; the rest is train
        for name in ("test", "dev", "train"):
            if name == "train" or len(chosen[name]) + len(group) <= SPLIT_SIZES[name]:
                chosen[name].extend(group)
                break
    return {name: tuple(sentences) for name, sentences in chosen.items()}


def tatoeba_split(name: str, by: str = "meaning") -> list[tuple[str, list[str]]]:
    """Load the "train", "dev" or "test" split of the Tatoeba pairs.

    (English sentence, [its Chinese translations]) for the "train", "dev" or "test"
    split.

    ``by="meaning"`` (the default, the split the shipped translator was trained on):
    all translations of one English sentence fall on one side, and so do its
    near-twins (``twin_groups``), the sentences that differ from it only by
    case, punctuation, spacing or a contraction, or share a translation with it.
    ``by="sentence"`` groups by the exact English string only (the pitfall this
    chapter measures: near-twins then cross sides). The sentences (or groups) are
    shuffled once with ``SPLIT_SEED``; the test set takes them in that order up to
    1,000 sentences (a group that would overflow goes on), then the dev set up to
    500, and the train set has the rest.
    """
    if name not in ("train", "dev", "test"):
        raise ValueError(f'split must be "train", "dev" or "test"; got {name!r}')
    if by not in ("sentence", "meaning"):
        raise ValueError(f'by must be "sentence" or "meaning"; got by={by!r}')
    translations = _translations()
    return [
        (sentence, list(translations[sentence]))
        for sentence in _split_sentences(by)[name]
    ]
