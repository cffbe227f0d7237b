"""Chapter 6 exercises: masking (boolean masks, True = may attend).

    from book_exercises import check
    check(look_ahead_mask, device=device)

Each check calls the reader's function on CPU tensors (pass ``device=`` to move them) and compares
its output, moved to the CPU, with transformer_book's subsequent_mask, padding_mask and target_mask.
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise
from transformer_book import padding_mask, subsequent_mask, target_mask

POLARITY_HINT = (
    "your mask is the wrong way round: True must mean 'may attend' (this book and "
    "F.scaled_dot_product_attention); yours is True where attention is blocked "
    "(nn.MultiheadAttention's convention)."
)


def _describe_mask(got, expected, case):
    """Name the first query/key pair the reader's mask gets wrong."""
    if got.dtype != torch.bool:
        return (
            f"return a boolean mask (True = may attend); got dtype {got.dtype}. A float 0/1 mask "
            "would be added to the scores by PyTorch, not block anything."
        )
    if got.shape != expected.shape:
        return None
    leak = (got & ~expected).nonzero()
    if len(leak):
        *batch, query, key = leak[0].tolist()
        where = f" in sentence {batch[0]}" if batch and expected.size(0) > 1 else ""
        return f"your mask lets position {query} see position {key}{where}, which must be hidden."
    blocked = (~got & expected).nonzero()
    *batch, query, key = blocked[0].tolist()
    where = f" in sentence {batch[0]}" if batch and expected.size(0) > 1 else ""
    return f"your mask stops position {query} from seeing position {key}{where}, which it may see."


# ---------------------------------------------------------------------------------------------
# Exercise 1: the look-ahead mask


def _squeeze_leading_one(mask):
    if isinstance(mask, torch.Tensor) and mask.dim() == 3 and mask.size(0) == 1:
        return mask[0]
    return mask


@exercise(
    cases=lambda: [Case((5,), "size 5"), Case((1,), "size 1"), Case((8,), "size 8")],
    normalize=_squeeze_leading_one,
    describe=_describe_mask,
    mistakes=[
        Mistake(POLARITY_HINT, lambda size: ~subsequent_mask(size)[0]),
        Mistake(
            "your mask hides the diagonal: position i cannot see itself, and row 0 sees nothing "
            "(the softmax of a fully masked row is NaN). That is `triu(ones, diagonal=0) == 0` "
            "(the source notes' version); use diagonal=1, or torch.ones(size, size).tril().bool().",
            lambda size: torch.triu(torch.ones(size, size), diagonal=0) == 0,
        ),
    ],
)
def look_ahead_mask(size):
    """A (size, size) boolean mask, True where query i may attend to key j (j <= i)."""
    return subsequent_mask(size)[0]


# ---------------------------------------------------------------------------------------------
# Exercise 2: the padding mask


def _padding_cases():
    return [
        Case((torch.tensor([[5, 6, 7, 0, 0], [3, 4, 0, 0, 0]]), 0), "two padded sentences, pad_id=0"),
        Case((torch.tensor([[4, 5, 1, 1], [6, 7, 8, 9], [2, 1, 1, 1], [3, 3, 1, 1]]), 1), "batch 4 == seq 4, pad_id=1"),
        Case((torch.tensor([[3, 4, 5]]), 0), "no padding at all"),
    ]


exercise(
    task="(batch, seq) token ids -> (batch, 1, seq), True at real tokens.",
    cases=_padding_cases,
    describe=_describe_mask,
    mistakes=[
        Mistake(
            "your mask has shape (batch, seq): add the query axis, (tokens != pad_id).unsqueeze(1) "
            "-> (batch, 1, seq). Without it broadcasting reads the batch axis as the queries: an "
            "error, or silently the wrong mask when batch == seq.",
            lambda tokens, pad: tokens != pad,
        ),
        Mistake(
            "you added the axis in the wrong place: (batch, seq, 1) masks queries, not keys. Use "
            "unsqueeze(1) to get (batch, 1, seq).",
            lambda tokens, pad: (tokens != pad).unsqueeze(-1),
        ),
        Mistake(
            POLARITY_HINT + " Real tokens are True, padding False.", lambda tokens, pad: (tokens == pad).unsqueeze(1)
        ),
        Mistake(
            "you compared with 0, not with pad_id (the check uses pad_id=1).",
            lambda tokens, pad: (tokens != 0).unsqueeze(1),
        ),
    ],
)(padding_mask)


# ---------------------------------------------------------------------------------------------
# Exercise 3: the target mask


def _target_cases():
    return [
        Case((torch.tensor([[1, 5, 6, 0], [1, 7, 0, 0]]), 0), "two padded targets, pad_id=0"),
        Case((torch.tensor([[1, 4, 4, 5, 9, 2]]), 2), "one target, padding only at the end, pad_id=2"),
        Case((torch.tensor([[1], [1]]), 0), "targets of one token"),
    ]


def _look_ahead(tokens):
    size = tokens.size(1)
    return torch.ones(size, size, dtype=torch.bool).tril().expand(tokens.size(0), size, size)


exercise(
    task="(batch, seq) target ids -> (batch, seq, seq): no padding keys and no future positions.",
    cases=_target_cases,
    describe=_describe_mask,
    mistakes=[
        Mistake(
            "you combined the masks with | (or): a key blocked by either mask must be blocked, "
            "so combine them with & (and).",
            lambda tokens, pad: (tokens != pad).unsqueeze(1) | _look_ahead(tokens),
        ),
        Mistake(
            "the look-ahead mask is missing: & it with the lower triangle.",
            lambda tokens, pad: (tokens != pad).unsqueeze(1).expand(-1, tokens.size(1), -1),
        ),
        Mistake(
            "the look-ahead mask is missing: & it with the lower triangle (your mask has shape (batch, 1, seq)).",
            lambda tokens, pad: (tokens != pad).unsqueeze(1),
        ),
        Mistake(
            "the padding mask is missing: padding keys must be hidden too.", lambda tokens, pad: _look_ahead(tokens)
        ),
        Mistake(
            "the padding mask is applied to the queries (rows) instead of the keys (columns): "
            "use (tokens != pad_id).unsqueeze(1), shape (batch, 1, seq).",
            lambda tokens, pad: (tokens != pad).unsqueeze(-1) & _look_ahead(tokens),
        ),
    ],
)(target_mask)
