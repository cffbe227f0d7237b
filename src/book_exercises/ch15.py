"""Chapter 15 exercises: the causal language-model loss (the shift), the 藏头 logit mask,
top-p filtering.

    from book_exercises.ch15 import check_next_token_loss
    check_next_token_loss(next_token_loss)

Every checker calls the reader's function on small fixed, seeded inputs and compares it with
transformer_book.gpt.causal_lm_loss, a mask written here, or transformer_book.top_p_filter.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from book_exercises.core import Case, Exercise, Mistake, run, seeded
from transformer_book.decoding import top_p_filter
from transformer_book.gpt import causal_lm_loss

# Exercise 1: the causal language-model loss


def _loss_cases():
    g = seeded(15)
    tokens = torch.randint(3, 9, (2, 6), generator=g)
    tokens[1, 4:] = 0  # the second poem is shorter: padding
    logits = torch.randn(2, 6, 9, generator=g, dtype=torch.float32)
    return [
        Case((logits, tokens), "2 sequences of 6 tokens, the second padded after 4"),
        Case((logits[:1, :3], tokens[:1, :3]), "one sequence of 3 tokens"),
    ]


def _unshifted(logits, tokens):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens.reshape(-1),
                           ignore_index=0)


NEXT_TOKEN_LOSS = Exercise(
    name="next_token_loss",
    task="the mean cross-entropy of every next token, padding (id 0) left out.",
    cases=_loss_cases,
    reference=lambda logits, tokens: causal_lm_loss(logits, tokens, pad_id=0),
    atol=1e-6,
    rtol=1e-6,
    mistakes=[
        Mistake("shift by one: the logits at position t predict the token at t + 1, so "
                "compare logits[:, :-1] with tokens[:, 1:]; unshifted, the model is asked "
                "to copy the token it can already see.", _unshifted),
        Mistake("leave the padding targets out (ignore_index=0): a short poem's padding is "
                "no next character.",
                lambda logits, tokens: F.cross_entropy(
                    logits[:, :-1].reshape(-1, logits.size(-1)),
                    tokens[:, 1:].reshape(-1))),
    ],
)


def check_next_token_loss(function, device=None):
    """Check ``function(logits (batch, seq, vocab), tokens (batch, seq)) -> loss``."""
    return run(NEXT_TOKEN_LOSS, function, device)


# Exercise 2: the 藏头 mask


def _acrostic(logits, head_id):
    kept = torch.full_like(logits, float("-inf"))
    kept[..., head_id] = logits[..., head_id]
    return kept


def _mask_cases():
    logits = torch.randn(10, generator=seeded(3), dtype=torch.float32)
    return [Case((logits, 4), "10 logits, the head character is id 4"),
            Case((logits, 0), "10 logits, the head character is id 0")]


ACROSTIC_MASK = Exercise(
    name="acrostic_logits",
    task="logits where only the head character can be drawn (-inf everywhere else).",
    cases=_mask_cases,
    reference=_acrostic,
    mistakes=[
        Mistake("set the other logits to -inf, not to 0: exp(0) = 1 still leaves them a "
                "share of the probability.",
                lambda logits, head: torch.zeros_like(logits).index_fill(
                    0, torch.tensor([head]), float(logits[head]))),
        Mistake("every other character must become impossible: set all logits but the "
                "head character's to -inf.", lambda logits, head: logits.clone()),
    ],
)


def check_acrostic_logits(function, device=None):
    """Check ``function(logits (vocab,), head_id) -> logits``."""
    return run(ACROSTIC_MASK, function, device)


# Exercise 3: top-p


def _top_p_cases():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0], dtype=torch.float32)
    return [Case((logits, 0.9), "5 logits, top_p 0.9"),
            Case((logits, 0.5), "5 logits, top_p 0.5"),
            Case((logits, 0.1), "5 logits, top_p 0.1 (the best token alone)")]


def _top_p_exclusive(logits, top_p):
    probabilities = logits.softmax(-1)
    order = probabilities.argsort(descending=True)
    mass = probabilities[order].cumsum(-1)
    drop = torch.zeros_like(logits, dtype=torch.bool)
    drop[order] = mass > top_p
    return logits.masked_fill(drop, float("-inf"))


def _top_p_ascending(logits, top_p):
    probabilities = logits.softmax(-1)
    order = probabilities.argsort(descending=False)
    in_order = probabilities[order]
    drop = torch.zeros_like(logits, dtype=torch.bool)
    drop[order] = in_order.cumsum(-1) - in_order >= top_p
    return logits.masked_fill(drop, float("-inf"))


TOP_P = Exercise(
    name="top_p",
    task="logits with -inf outside the nucleus, the fewest likeliest tokens holding top_p.",
    cases=_top_p_cases,
    reference=top_p_filter,
    mistakes=[
        Mistake("keep the token that brings the mass over top_p: the nucleus is the "
                "smallest set whose probabilities sum to at least top_p, so drop a token "
                "only when the likelier ones already reach top_p.", _top_p_exclusive),
        Mistake("the nucleus holds the LIKELIEST tokens: sort the probabilities in "
                "descending order before adding them up.",
                _top_p_ascending),
    ],
)


def check_top_p(function, device=None):
    """Check ``function(logits (vocab,), top_p) -> logits``."""
    return run(TOP_P, function, device)


# ---------------------------------------------------------------------------------------------

STUBS = {
    "next_token_loss": '''def next_token_loss(logits, tokens):
    """logits (batch, seq, vocab), tokens (batch, seq) -> the mean next-token loss."""
    # Your code here (about 3 lines).
    raise NotImplementedError
''',
    "acrostic_logits": '''def acrostic_logits(logits, head_id):
    """logits (vocab,) -> logits where only head_id can be sampled."""
    # Your code here (about 3 lines).
    raise NotImplementedError
''',
    "top_p": '''def top_p(logits, top_p):
    """logits (vocab,) -> logits with -inf outside the nucleus."""
    # Your code here (about 6 lines).
    raise NotImplementedError
''',
}

SOLUTIONS = {
    "next_token_loss": '''import torch.nn.functional as F


def next_token_loss(logits, tokens):
    """logits (batch, seq, vocab), tokens (batch, seq) -> the mean next-token loss."""
    predictions = logits[:, :-1].reshape(-1, logits.size(-1))
    targets = tokens[:, 1:].reshape(-1)
    return F.cross_entropy(predictions, targets, ignore_index=0)
''',
    "acrostic_logits": '''import torch


def acrostic_logits(logits, head_id):
    """logits (vocab,) -> logits where only head_id can be sampled."""
    kept = torch.full_like(logits, float("-inf"))
    kept[head_id] = logits[head_id]
    return kept
''',
    "top_p": '''import torch


def top_p(logits, top_p):
    """logits (vocab,) -> logits with -inf outside the nucleus."""
    probabilities = logits.softmax(-1)
    order = probabilities.argsort(descending=True)
    sorted_probabilities = probabilities[order]
    before = sorted_probabilities.cumsum(-1) - sorted_probabilities
    drop = torch.zeros_like(logits, dtype=torch.bool)
    drop[order] = before >= top_p
    return logits.masked_fill(drop, float("-inf"))
''',
}

CHECKERS = {
    "next_token_loss": check_next_token_loss,
    "acrostic_logits": check_acrostic_logits,
    "top_p": check_top_p,
}

QUESTION = (
    "Why can a decoder-only model be trained on all positions of a poem at once, while it "
    "must write the poem one character at a time?"
)
ANSWER = (
    "In training, every character of the poem is known: the causal mask lets position t see "
    "only the characters before it, so the prediction at each position is exactly the one it "
    "would make while writing, and all of them come out of one forward pass. While writing, "
    "the character at t + 1 does not exist until the one at t has been drawn, so the steps "
    "are sequential; the key/value cache only saves recomputing the earlier positions."
)
