"""Chapter 6 exercises: masking (boolean masks, True = may attend).

    from book_exercises.ch06 import check_look_ahead_mask
    check_look_ahead_mask(look_ahead_mask)

Every checker calls the reader's function on CPU tensors (pass ``device=`` to move them) and compares
its output, moved to the CPU, with transformer_book's subsequent_mask, padding_mask and target_mask.
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Exercise, Mistake, run
from transformer_book import padding_mask, subsequent_mask, target_mask

POLARITY_HINT = ("your mask is the wrong way round: True must mean 'may attend' (this book and "
                 "F.scaled_dot_product_attention); yours is True where attention is blocked "
                 "(nn.MultiheadAttention's convention).")


def _describe_mask(got, expected, case):
    """Name the first query/key pair the reader's mask gets wrong."""
    if got.dtype != torch.bool:
        return (f"return a boolean mask (True = may attend); got dtype {got.dtype}. A float 0/1 mask "
                "would be added to the scores by PyTorch, not block anything.")
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


LOOK_AHEAD_MASK = Exercise(
    name="look_ahead_mask",
    task="a (size, size) boolean mask, True where query i may attend to key j (j <= i).",
    cases=lambda: [Case((5,), "size 5"), Case((1,), "size 1"), Case((8,), "size 8")],
    reference=lambda size: subsequent_mask(size)[0],
    normalize=_squeeze_leading_one,
    describe=_describe_mask,
    mistakes=[
        Mistake(POLARITY_HINT, lambda size: ~subsequent_mask(size)[0]),
        Mistake("your mask hides the diagonal: position i cannot see itself, and row 0 sees nothing "
                "(the softmax of a fully masked row is NaN). That is `triu(ones, diagonal=0) == 0` "
                "(the source notes' version); use diagonal=1, or torch.ones(size, size).tril().bool().",
                lambda size: torch.triu(torch.ones(size, size), diagonal=0) == 0),
    ],
)


def check_look_ahead_mask(function, device=None):
    """Check a function that builds the look-ahead (subsequent) mask.

    Check ``function(size) -> (size, size)`` boolean mask (a leading axis of 1 is accepted).
    No tensor inputs, so ``device`` is not used; the output is moved to the CPU."""
    return run(LOOK_AHEAD_MASK, function, device)


# ---------------------------------------------------------------------------------------------
# Exercise 2: the padding mask


def _padding_cases():
    return [
        Case((torch.tensor([[5, 6, 7, 0, 0], [3, 4, 0, 0, 0]]), 0), "two padded sentences, pad_id=0"),
        Case((torch.tensor([[4, 5, 1, 1], [6, 7, 8, 9], [2, 1, 1, 1], [3, 3, 1, 1]]), 1),
             "batch 4 == seq 4, pad_id=1"),
        Case((torch.tensor([[3, 4, 5]]), 0), "no padding at all"),
    ]


PADDING_MASK = Exercise(
    name="padding_mask",
    task="(batch, seq) token ids -> (batch, 1, seq), True at real tokens.",
    cases=_padding_cases,
    reference=padding_mask,
    describe=_describe_mask,
    mistakes=[
        Mistake("your mask has shape (batch, seq): add the query axis, (tokens != pad_id).unsqueeze(1) "
                "-> (batch, 1, seq). Without it broadcasting reads the batch axis as the queries: an "
                "error, or silently the wrong mask when batch == seq.",
                lambda tokens, pad: tokens != pad),
        Mistake("you added the axis in the wrong place: (batch, seq, 1) masks queries, not keys. Use "
                "unsqueeze(1) to get (batch, 1, seq).",
                lambda tokens, pad: (tokens != pad).unsqueeze(-1)),
        Mistake(POLARITY_HINT + " Real tokens are True, padding False.",
                lambda tokens, pad: (tokens == pad).unsqueeze(1)),
        Mistake("you compared with 0, not with pad_id (the check uses pad_id=1).",
                lambda tokens, pad: (tokens != 0).unsqueeze(1)),
    ],
)


def check_padding_mask(function, device=None):
    """Check a function that builds the padding mask of the keys.

    Check ``function(tokens, pad_id) -> (batch, 1, seq)`` boolean mask. Inputs on the CPU unless
    ``device`` is given; the output is moved to the CPU."""
    return run(PADDING_MASK, function, device)


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


TARGET_MASK = Exercise(
    name="target_mask",
    task="(batch, seq) target ids -> (batch, seq, seq): no padding keys and no future positions.",
    cases=_target_cases,
    reference=target_mask,
    describe=_describe_mask,
    mistakes=[
        Mistake("you combined the masks with | (or): a key blocked by either mask must be blocked, "
                "so combine them with & (and).",
                lambda tokens, pad: (tokens != pad).unsqueeze(1) | _look_ahead(tokens)),
        Mistake("the look-ahead mask is missing: & it with the lower triangle.",
                lambda tokens, pad: (tokens != pad).unsqueeze(1).expand(-1, tokens.size(1), -1)),
        Mistake("the look-ahead mask is missing: & it with the lower triangle "
                "(your mask has shape (batch, 1, seq)).",
                lambda tokens, pad: (tokens != pad).unsqueeze(1)),
        Mistake("the padding mask is missing: padding keys must be hidden too.",
                lambda tokens, pad: _look_ahead(tokens)),
        Mistake("the padding mask is applied to the queries (rows) instead of the keys (columns): "
                "use (tokens != pad_id).unsqueeze(1), shape (batch, 1, seq).",
                lambda tokens, pad: (tokens != pad).unsqueeze(-1) & _look_ahead(tokens)),
    ],
)


def check_target_mask(function, device=None):
    """Check a function that builds the decoder's target mask.

    Check ``function(tokens, pad_id) -> (batch, seq, seq)`` boolean mask. Inputs on the CPU
    unless ``device`` is given; the output is moved to the CPU."""
    return run(TARGET_MASK, function, device)


# ---------------------------------------------------------------------------------------------

STUBS = {
    "look_ahead_mask": '''def look_ahead_mask(size):
    """(size, size) boolean: True where query i may attend to key j (j <= i)."""
    # Your code here (1 line).
    raise NotImplementedError
''',
    "padding_mask": '''def padding_mask(tokens, pad_id):
    """(batch, seq) ids -> (batch, 1, seq): True at real tokens, False at padding."""
    # Your code here (1 line).
    raise NotImplementedError
''',
    "target_mask": '''def target_mask(tokens, pad_id):
    """(batch, seq) ids -> (batch, seq, seq): True where query i may read key j."""
    # Your code here (3 lines): padding mask and look-ahead mask together.
    raise NotImplementedError
''',
}

SOLUTIONS = {
    "look_ahead_mask": '''import torch


def look_ahead_mask(size):
    """(size, size) boolean: True where query i may attend to key j (j <= i)."""
    return torch.ones(size, size, dtype=torch.bool).tril()  # diagonal included
''',
    "padding_mask": '''def padding_mask(tokens, pad_id):
    """(batch, seq) ids -> (batch, 1, seq): True at real tokens, False at padding."""
    # the axis of size 1 broadcasts over the queries
    return (tokens != pad_id).unsqueeze(1)
''',
    "target_mask": '''import torch


def target_mask(tokens, pad_id):
    """(batch, seq) ids -> (batch, seq, seq): True where query i may read key j."""
    seq = tokens.size(1)
    real_keys = (tokens != pad_id).unsqueeze(1)  # (batch, 1, seq)
    # (seq, seq)
    no_future = torch.ones(seq, seq, dtype=torch.bool, device=tokens.device).tril()
    return real_keys & no_future  # (batch, seq, seq)
''',
}

CHECKERS = {
    "look_ahead_mask": check_look_ahead_mask,
    "padding_mask": check_padding_mask,
    "target_mask": check_target_mask,
}

QUESTION = (
    "The encoder needs only a padding mask, but the decoder also needs the look-ahead mask, even in "
    "training, when the whole target sentence is known. Why?"
)
ANSWER = (
    "In training the decoder reads the whole (shifted) target at once and predicts, at every position i, "
    "the token at i + 1. Without the look-ahead mask position i could attend to position i + 1 and copy "
    "the answer: the training loss falls, but at inference, where the later tokens do not exist yet, "
    "the model has learnt nothing it can use. The mask makes training see exactly what generation will "
    "see. The encoder reads a source sentence that is complete at inference too, so every source "
    "position may look at every other real one."
)
