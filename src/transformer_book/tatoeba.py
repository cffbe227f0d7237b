# This file is generated from book/13_tokens_from_text.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Real sentences: the Tatoeba English-Chinese pairs shipped with the package, and
their fixed split into train, dev and test (chapter 13)."""

from __future__ import annotations

import functools
import lzma
import random
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


def read_pairs(path: str | Path | None = None) -> list[SentencePair]:
    """Every line of an xz-compressed data file (default: the one the package ships).

    A line is English, Chinese and an attribution, separated by TABs; a file with any
    other line is refused, naming the line.
    """
    if path is None:
        name, raw = DATA_FILE, (files("transformer_book") / "data" / DATA_FILE)
        raw = raw.read_bytes()
    else:
        name, raw = Path(path).name, Path(path).read_bytes()
    try:
        text = lzma.decompress(raw).decode("utf-8")
    except (lzma.LZMAError, UnicodeDecodeError) as error:
        raise ValueError(f"{name} is not xz-compressed UTF-8 text ({error})") from None
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
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


def tatoeba_split(name: str) -> list[tuple[str, list[str]]]:
    """Load the "train", "dev" or "test" split of the Tatoeba pairs.

    (English sentence, [its Chinese translations]) for the "train", "dev" or "test"
    split.

    The split is by English sentence: all translations of one sentence fall on one
    side, so no test sentence was seen in training. The sentences are shuffled once
    with ``SPLIT_SEED``; the first 1,000 are the test set, the next 500 the dev set.
    """
    if name not in ("train", "dev", "test"):
        raise ValueError(f'split must be "train", "dev" or "test"; got {name!r}')
    translations = _translations()
    english = sorted(translations)
    random.Random(SPLIT_SEED).shuffle(english)
    test_end = SPLIT_SIZES["test"]
    dev_end = test_end + SPLIT_SIZES["dev"]
    chosen = {
        "test": english[:test_end],
        "dev": english[test_end:dev_end],
        "train": english[dev_end:],
    }[name]
    return [(sentence, list(translations[sentence])) for sentence in chosen]
