# This file is generated from book/13_tokens_from_text.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Batches of real sentences: grouped by length under a token budget (chapter 13)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch


def length_batches(
    lengths: Sequence[int], max_tokens: int, seed: int | None = 0
) -> list[list[int]]:
    """Group example indices into batches of at most ``max_tokens`` padded tokens.

    Indices of examples, grouped so that a batch padded to its longest example holds
    at most ``max_tokens`` tokens (batch size x longest length).

    Examples are sorted by length (ties in random order), cut into batches, and the
    batches shuffled; ``seed=None`` uses no randomness: ties in index order, batches in
    length order.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1; got {max_tokens}")
    too_long = [index for index, length in enumerate(lengths) if length > max_tokens]
    if too_long:
        first = too_long[0]
        raise ValueError(
            f"example {first} has {lengths[first]} tokens, more than "
            f"max_tokens={max_tokens} ({len(too_long)} such examples)"
        )
    if seed is None:  # no randomness: ties keep their order (the sort is stable)
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    else:
        rng = random.Random(seed)
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    batches, batch, longest = [], [], 0
    for index in order:
        if batch and max(longest, lengths[index]) * (len(batch) + 1) > max_tokens:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(index)
        longest = max(longest, lengths[index])
    if batch:
        batches.append(batch)
    if seed is not None:
        rng.shuffle(batches)
    return batches


def padding_share(batches: Sequence[Sequence[int]], lengths: Sequence[int]) -> float:
    """The fraction of a padded batch's slots that are padding, over all batches."""
    real = sum(lengths[index] for batch in batches for index in batch)
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    return 1.0 - real / padded


def pad_rows(
    rows: Sequence[Sequence[int]], pad_id: int = 0, device="cpu"
) -> torch.Tensor:
    """Pad token id lists of different lengths into one (batch, longest) tensor.

    Token id lists of different lengths -> (batch, longest), padded with
    ``pad_id``."""
    if not rows:
        raise ValueError("pad_rows needs at least one row; got none")
    longest = max(len(row) for row in rows)
    padded = [list(row) + [pad_id] * (longest - len(row)) for row in rows]
    return torch.tensor(padded, dtype=torch.long, device=device)
