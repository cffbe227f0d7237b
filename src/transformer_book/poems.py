# This file is generated from book/15_writing_poems.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Tang poems (chapter 15): five-character poems of four or eight verses shipped with
the package, their fixed split into train and held-out (near-twins on one side), and a
character vocabulary."""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from pathlib import Path

import torch

from transformer_book.tasks import Vocabulary
from transformer_book.tatoeba import read_lines

DATA_FILE = (
    "tang_poems.txt.xz"  # in transformer_book/data/, with its README and LICENSE
)
SPLIT_SEED = 0
HELD_OUT = 1000  # distinct poems, whole groups of near-twins; "train" has the rest
# One poem: verses of five characters, each closed by ， or 。 (59 verses by ？)
POEM = re.compile(r"(?:[^，。？\s]{5}[，。？])+")


def read_poems(path: str | Path | None = None) -> list[str]:
    """Every line of an xz-compressed poem file (default: the one the package ships).

    A line is one poem, verses of five characters each followed by ，, 。
    or ？; a file with any other line is refused, naming the line.
    """
    name, lines = read_lines(path, DATA_FILE)  # as chapter 13 reads its sentences
    poems = []
    for number, line in enumerate(lines, start=1):
        if not POEM.fullmatch(line):
            raise ValueError(
                f"{name}, line {number}: expected one poem, verses of five characters "
                f"each followed by ，, 。 or ？; got {line[:80]!r}"
            )
        poems.append(line)
    return poems


def split_verses(poem: str) -> list[str]:
    """A poem's verses, five characters each, without their marks."""
    return re.findall(r"[^，。？]{5}", poem)


def verse_keys(verse: str) -> list[str]:
    """The verse, and the verse with each of its characters in turn replaced by *.

    Two verses that differ in at most one character (an edition's variant: 凤凰 and
    凤皇, 常时 and 当时) share a key.
    """
    return [verse] + [verse[:i] + "*" + verse[i + 1 :] for i in range(len(verse))]


@functools.cache
def twin_poems() -> tuple[tuple[str, ...], ...]:
    """The distinct poems in groups of near-twins (each group and the groups sorted).

    Two poems are twins when at least half the verses of the shorter one have a
    verse in the other that differs in at most one character: two editions of one
    poem, or a quatrain taken from a longer poem. A twin of a twin joins the group.
    """
    poems = sorted(set(read_poems()))
    # a verse key -> the one poem that has it (most keys), or the list of poems that do
    holders: dict[str, int | list[int]] = {}
    for index, poem in enumerate(poems):
        for verse in split_verses(poem):
            for key in verse_keys(verse):
                held = holders.setdefault(key, index)
                if isinstance(held, int) and held != index:
                    holders[key] = [held, index]
                elif isinstance(held, list) and held[-1] != index:
                    held.append(index)
    parent = list(range(len(poems)))  # union-find

    def root(index: int) -> int:
        while parent[index] != index:
            index = parent[index]
        return index

    for index, poem in enumerate(poems):
        own = set(split_verses(poem))
        shared = Counter()  # another poem -> how many of our verses it has
        for verse in own:
            found = set()  # the other poems with a verse that differs in at most one
            for key in verse_keys(verse):
                if isinstance(holders[key], list):  # a key of one poem is only ours
                    found.update(holders[key])
            shared.update(found - {index})
        for other, count in shared.items():
            if 2 * count >= min(len(own), len(set(split_verses(poems[other])))):
                one, two = root(index), root(other)
                parent[max(one, two)] = min(one, two)
    groups: dict[int, list[str]] = {}
    for index, poem in enumerate(poems):
        groups.setdefault(root(index), []).append(poem)
    return tuple(sorted(tuple(group) for group in groups.values()))


@functools.cache
def _split_poems(by: str) -> dict[str, tuple[str, ...]]:
    if by == "poem":  # each distinct poem on its own
        groups = [(poem,) for poem in sorted(set(read_poems()))]
    else:
        groups = list(twin_poems())
    random.Random(SPLIT_SEED).shuffle(groups)
    chosen: dict[str, list[str]] = {"held-out": [], "train": []}
    for group in groups:  # held out up to 1,000 poems (a group that overflows trains)
        fits = len(chosen["held-out"]) + len(group) <= HELD_OUT
        chosen["held-out" if fits else "train"].extend(group)
    return {name: tuple(poems) for name, poems in chosen.items()}


def poem_split(name: str, by: str = "meaning") -> list[str]:
    """The "train" or "held-out" poems.

    ``by="meaning"`` (the default, the split the shipped poet was trained on): a poem
    that occurs twice in the file is one poem, on one side, and so are its
    near-twins (``twin_poems``), poems that share half their verses up to a variant
    character. The poems (or groups) are shuffled once with ``SPLIT_SEED`` and taken
    in turn into the held-out set up to 1,000 poems; the rest is for training.
    """
    if name not in ("train", "held-out"):
        raise ValueError(f'split must be "train" or "held-out"; got {name!r}')
    if by not in ("poem", "meaning"):
        raise ValueError(f'by must be "poem" or "meaning"; got by={by!r}')
    return list(_split_poems(by)[name])


class PoemVocabulary(Vocabulary):
    """Characters <-> ids, with three special tokens.

    "<pad>" (id 0), the poem boundary "<s>" (id 1; it starts and ends every poem)
    and "<unk>" (id 2), then the characters, sorted; ``decode`` leaves out all three."""

    specials = ("<pad>", "<s>", "<unk>")
    skipped = specials

    def __init__(self, characters):
        super().__init__(sorted(set(characters)))
        self.boundary_id = self.start_id

    @classmethod
    def from_poems(cls, poems) -> PoemVocabulary:
        return cls(set("".join(poems)))

    def unknown(self, text: str) -> list[str]:
        """The characters of ``text`` that the vocabulary lacks, in order, once each."""
        return list(dict.fromkeys(c for c in text if c not in self.ids))

    def encode(self, text: str, boundaries: bool = True) -> list[int]:
        """A poem -> ids: <s>, its characters, <s>; unknown characters become <unk>."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}")
        ids = super().encode(text)
        return [self.boundary_id, *ids, self.boundary_id] if boundaries else ids

    def batch(self, poems, device=None) -> torch.Tensor:
        """Poems -> (batch, longest + 2) ids, padded with <pad>."""
        rows = [self.encode(poem) for poem in poems]
        width = max(len(row) for row in rows)
        padded = [row + [self.pad_id] * (width - len(row)) for row in rows]
        return torch.tensor(padded, dtype=torch.long, device=device)
