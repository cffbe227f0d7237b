# This file is generated from book/09_full_transformer.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Tasks: a vocabulary, generated pairs, batches, exact match (chapter 9)."""

from __future__ import annotations

import datetime
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch


class Vocabulary:
    """Tokens <-> ids: the special tokens first, then the given tokens in order.

    ``tokens``: a string (a token per character) or a list of tokens (words, say).
    Subclasses change ``specials``; with "<unk>" among them, a token the vocabulary
    lacks encodes as "<unk>", and without it ``encode`` refuses the token.
    """

    specials = ("<pad>", "<s>", "</s>")  # ids 0, 1, 2
    skipped = ("<pad>", "<s>")  # the special tokens that decode leaves out

    def __init__(self, tokens: str | Iterable[str]):
        tokens, name = list(tokens), type(self).__name__
        if not tokens:
            raise ValueError(f"{name} needs at least one token; got none")
        repeated = sorted(token for token, n in Counter(tokens).items() if n > 1)
        special = sorted(set(tokens) & set(self.specials))
        if repeated or special:
            raise ValueError(
                f"{name} tokens must be unique and not special tokens; "
                f"repeated: {repeated[:5]}, special: {special}"
            )
        self.tokens = [*self.specials, *tokens]  # index = id
        self.ids = {token: index for index, token in enumerate(self.tokens)}
        # each special token's id, None where this vocabulary has no such token
        self.pad_id, self.start_id, self.end_id, self.unk_id = (
            self.ids[token] if token in self.specials else None
            for token in ("<pad>", "<s>", "</s>", "<unk>")
        )
        self.skipped_ids = {self.ids[token] for token in self.skipped}
        # characters join as they are, words with a space
        self.separator = "" if all(len(token) == 1 for token in tokens) else " "

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: str | Iterable[str]) -> list[int]:
        """The id of each token (of each character of a string)."""
        tokens = list(tokens)
        if self.unk_id is None:
            unknown = sorted({token for token in tokens if token not in self.ids})
            if unknown:
                raise ValueError(
                    f"cannot encode {unknown!r}: not in the vocabulary "
                    f"{self.tokens[len(self.specials):]!r}"
                )
        return [self.ids.get(token, self.unk_id) for token in tokens]

    def decode_tokens(self, ids: Iterable[int] | torch.Tensor) -> list[str]:
        """The tokens of ``ids``: up to the first "</s>", the ``skipped`` left out."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        tokens = []
        for index in ids:
            if index == self.end_id:
                break
            if not 0 <= index < len(self):
                raise ValueError(
                    f"no token has id {index}; the ids are 0 to {len(self) - 1}"
                )
            if index not in self.skipped_ids:
                tokens.append(self.tokens[index])
        return tokens

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        """The text of ``ids``: their tokens, joined by ``separator``."""
        return self.separator.join(self.decode_tokens(ids))


@dataclass
class Task:
    """A generated sequence-to-sequence task.

    ``generate(rng)`` returns one (source, target) pair: strings, or lists of tokens
    for a word-level vocabulary. Lengths count tokens, without "<s>" and "</s>".
    """

    name: str
    source_vocab: Vocabulary
    target_vocab: Vocabulary
    max_source_len: int
    max_target_len: int
    generate: Callable[[random.Random], tuple]

    def pairs(self, count: int, seed: int) -> list[tuple]:
        """``count`` pairs drawn with ``random.Random(seed)``, the same everywhere."""
        if count < 0:
            raise ValueError(f"count must be >= 0; got {count}")
        rng = random.Random(seed)
        return [self.generate(rng) for _ in range(count)]

    def batch(self, pairs: Sequence[tuple], device: torch.device | str = "cpu"):
        """(source_ids (batch, max_source_len), target_ids (batch, max_target_len + 2)).

        Sources are padded with "<pad>"; targets are "<s>" target "</s>" then padding,
        as ``sequence_loss`` reads them (input target[:, :-1], labels target[:, 1:]).
        """
        source_rows, target_rows = [], []
        for source, target in pairs:
            source_ids = self.source_vocab.encode(source)
            vocab = self.target_vocab
            target_ids = [vocab.start_id, *vocab.encode(target), vocab.end_id]
            if len(source_ids) > self.max_source_len:
                raise ValueError(
                    f"source {source!r} has {len(source_ids)} tokens; "
                    f"{self.name} allows {self.max_source_len}"
                )
            if len(target_ids) > self.max_target_len + 2:
                raise ValueError(
                    f"target {target!r} has {len(target_ids) - 2} tokens; "
                    f"{self.name} allows {self.max_target_len}"
                )
            source_rows.append(
                source_ids + [0] * (self.max_source_len - len(source_ids))
            )
            target_rows.append(
                target_ids + [0] * (self.max_target_len + 2 - len(target_ids))
            )
        source_tensor = torch.tensor(source_rows, dtype=torch.long, device=device)
        target_tensor = torch.tensor(target_rows, dtype=torch.long, device=device)
        return source_tensor, target_tensor  # (batch, source), (batch, target + 2)

    @staticmethod
    def exact_match(predicted: Sequence[str], expected: Sequence[str]) -> float:
        """Fraction of predictions equal to their expected string."""
        if len(predicted) != len(expected) or not expected:
            raise ValueError(
                f"exact_match needs two equally long, non-empty lists; "
                f"got {len(predicted)} predictions and {len(expected)} expected"
            )
        return sum(p == e for p, e in zip(predicted, expected)) / len(expected)


MONTHS = (
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "May",
    "Jun",
    "Jul",
    "Aug",
    "Sep",
    "Oct",
    "Nov",
    "Dec",
)
FIRST_DAY = datetime.date(1900, 1, 1).toordinal()
LAST_DAY = datetime.date(2099, 12, 31).toordinal()
HELD_OUT_EVERY = (
    8  # every 8th day of two centuries is held out (9,131 dates), never trained on
)


def date_source(date: datetime.date) -> str:
    return f"{date.day} {MONTHS[date.month - 1]} {date.year}"  # "7 Mar 1987"


def date_is_held_out(date: datetime.date) -> bool:
    return date.toordinal() % HELD_OUT_EVERY == 0


def dates_task(held_out: bool = False) -> Task:
    """ "7 Mar 1987" -> "1987-03-07"; ``held_out`` draws only from the held-out dates.

    Training and held-out dates are disjoint: a date is held out when its ordinal is a
    multiple of 8.
    """
    characters = sorted(set("0123456789 -" + "".join(MONTHS)))
    vocab = Vocabulary("".join(characters))

    def generate(rng: random.Random) -> tuple[str, str]:
        while True:
            date = datetime.date.fromordinal(rng.randint(FIRST_DAY, LAST_DAY))
            if date_is_held_out(date) == held_out:
                return date_source(date), date.isoformat()

    name = "dates (held out)" if held_out else "dates"
    return Task(
        name, vocab, vocab, max_source_len=11, max_target_len=10, generate=generate
    )
