"""Tests for transformer_book.batching (chapter 13): length batches under a token budget."""

import random
from itertools import pairwise

import pytest
import torch

from transformer_book import length_batches, pad_rows, padding_share


def test_every_example_once_and_every_batch_within_the_budget():
    rng = random.Random(0)
    lengths = [rng.randint(1, 40) for _ in range(2000)]
    batches = length_batches(lengths, max_tokens=300, seed=1)
    assert sorted(index for batch in batches for index in batch) == list(range(2000))
    assert all(len(batch) * max(lengths[i] for i in batch) <= 300 for batch in batches)
    # greedy filling: adding the next example of the sorted order would break the budget
    ordered = length_batches(lengths, max_tokens=300, seed=None)
    for batch, following in pairwise(ordered):
        longest = max(lengths[i] for i in batch + following[:1])
        assert (len(batch) + 1) * longest > 300
        assert max(lengths[i] for i in batch) <= min(lengths[i] for i in following)


def test_seeded_shuffle_is_reproducible_and_none_keeps_length_order():
    lengths = [5, 3, 9, 3, 1, 7, 2, 8] * 10
    assert length_batches(lengths, 20, seed=3) == length_batches(lengths, 20, seed=3)
    assert length_batches(lengths, 20, seed=3) != length_batches(lengths, 20, seed=4)
    in_order = length_batches(lengths, 20, seed=None)
    firsts = [lengths[batch[0]] for batch in in_order]
    assert firsts == sorted(firsts)


def test_length_batches_pad_far_less_than_random_batches():
    rng = random.Random(0)
    lengths = [rng.randint(1, 40) for _ in range(3000)]
    bucketed = length_batches(lengths, max_tokens=400, seed=0)
    order = list(range(3000))
    rng.shuffle(order)
    size = 3000 // len(bucketed) + 1
    shuffled = [order[i : i + size] for i in range(0, 3000, size)]
    assert padding_share(bucketed, lengths) < 0.05
    assert padding_share(shuffled, lengths) > 0.3


def test_padding_share_by_hand():
    assert padding_share([[0, 1]], [2, 4]) == pytest.approx(1 - 6 / 8)
    assert padding_share([[0], [1]], [2, 4]) == 0.0


def test_bad_budgets_name_the_example():
    with pytest.raises(ValueError, match="max_tokens must be >= 1; got 0"):
        length_batches([1, 2], 0)
    with pytest.raises(ValueError, match=r"example 1 has 50 tokens, more than max_tokens=40 \(1 such"):
        length_batches([3, 50, 4], 40)


def test_pad_rows():
    padded = pad_rows([[5, 6, 7], [8]], pad_id=0)
    assert torch.equal(padded, torch.tensor([[5, 6, 7], [8, 0, 0]]))
    assert padded.dtype == torch.long
    with pytest.raises(ValueError, match="at least one row"):
        pad_rows([])


def test_no_seed_means_no_randomness():
    """seed=None must not fall back to the OS's randomness: evaluation batches (of
    mean_token_loss, say) are the same in every process, so their sums are too."""
    lengths = [3, 1, 3, 2, 3, 1, 2, 3] * 20
    first = length_batches(lengths, 12, seed=None)
    random.seed(12345)
    assert length_batches(lengths, 12, seed=None) == first
    flat = [index for batch in first for index in batch]
    assert flat == sorted(range(len(lengths)), key=lambda i: lengths[i])  # ties in index order
