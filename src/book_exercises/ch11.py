"""Chapter 11 exercises: attention entropy, the argmax-alignment hit rate, ablating one head.

    from book_exercises import check
    check(attention_entropy, device=device)

Each check calls the reader's function on small seeded inputs (edge cases included: masked keys
with weight exactly 0, one-hot and uniform rows, rows with nothing to align to, one head) and
compares it with the rule chapter 11 applies to the trained model.
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise, seeded

# ---------------------------------------------------------------------------------------------
# Exercise 1: the entropy of each attention row


def _entropy_cases():
    scores = torch.randn(2, 3, 4, 6, generator=seeded(111))  # (batch, heads, q, k)
    look_ahead = torch.ones(4, 6, dtype=torch.bool).tril()  # masked keys: weight 0
    masked = scores.masked_fill(~look_ahead, float("-inf")).softmax(-1)
    special = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
    return [
        Case((scores.softmax(-1),), "weights of shape (2, 3, 4, 6), no zeros"),
        Case((masked,), "under a look-ahead mask: weights of exactly 0"),
        Case((special,), "a one-hot row (entropy 0) and a uniform row (log 4)"),
    ]


@exercise(
    cases=_entropy_cases,
    mistakes=[
        Mistake(
            "a weight of exactly 0 (a masked key) gives 0 * log 0 = nan in floating point; "
            "it must count as 0 (torch.special.entr does that, or clamp w before the log).",
            lambda w: -(w * w.log()).sum(dim=-1),
        ),
        Mistake(
            "use the natural logarithm (entropy in nats, as the chapter prints it); log2 gives bits.",
            lambda w: (torch.special.entr(w) / torch.log(torch.tensor(2.0))).sum(dim=-1),
        ),
        Mistake(
            "sum over the keys (the last dimension): each query's row is one distribution.",
            lambda w: torch.special.entr(w).sum(dim=-2),
        ),
        Mistake(
            "entropy is minus the sum of w log w, so it is never negative.",
            lambda w: -attention_entropy(w),
        ),
    ],
)
def attention_entropy(weights):
    """-sum over the keys of w * log(w), with 0 * log 0 = 0."""
    return torch.special.entr(weights).sum(dim=-1)  # -w log w, with 0 log 0 = 0


# ---------------------------------------------------------------------------------------------
# Exercise 2: how often the most attended key is an expected one


def _hit_cases():
    weights = torch.randn(3, 5, 5, generator=seeded(112)).softmax(-1)  # (3, 5, 5)
    expected = torch.zeros(3, 5, 5, dtype=torch.bool)
    top = weights.argmax(-1)  # make some rows hits, some misses, some empty
    for batch in range(3):
        for query in range(5):
            if (batch + query) % 3 == 0:
                expected[batch, query, top[batch, query]] = True  # a hit
            elif (batch + query) % 3 == 1:
                expected[batch, query, (top[batch, query] + 1) % 5] = True  # a miss
    wide = torch.randn(2, 3, 7, generator=seeded(113)).softmax(-1)  # 3 queries, 7 keys
    wide_expected = torch.zeros(2, 3, 7, dtype=torch.bool)
    wide_expected[:, :, :3] = True  # every row counts; hits where the argmax is < 3
    return [
        Case((weights, expected), "3 maps of 5 x 5, some rows with no expected key"),
        Case((wide, wide_expected), "3 queries over 7 keys, three expected keys each"),
    ]


@exercise(
    cases=_hit_cases,
    mistakes=[
        Mistake(
            "rows with no expected key (a dash, the 0 in front of a one-digit day) have nothing "
            "to hit: leave them out of the average instead of counting them as misses.",
            lambda w, e: e.gather(-1, w.argmax(-1, keepdim=True)).squeeze(-1).float().mean(),
        ),
        Mistake(
            "take the argmax over the keys (the last dimension): for each query, which position "
            "does it attend to most?",
            lambda w, e: alignment_hit_rate(w.transpose(-1, -2), e) if w.size(-1) == w.size(-2) else None,
        ),
        Mistake(
            "return a fraction (hits / rows counted), not the number of hits.",
            lambda w, e: alignment_hit_rate(w, e) * e.any(-1).sum(),
        ),
    ],
    normalize=lambda got: got.float() if isinstance(got, torch.Tensor) else torch.tensor(float(got)),
)
def alignment_hit_rate(weights, expected):
    """The fraction of rows with an expected key whose argmax key is expected."""
    counted = expected.any(dim=-1)  # (batch, queries): rows with something to hit
    most_attended = weights.argmax(dim=-1, keepdim=True)  # (batch, queries, 1)
    hit = expected.gather(-1, most_attended).squeeze(-1)  # (batch, queries)
    return hit[counted].float().mean()


# ---------------------------------------------------------------------------------------------
# Exercise 3: ablating one head


def _strided(concatenated, head, heads):
    batch, seq, width = concatenated.shape
    per_head = concatenated.reshape(batch, seq, width // heads, heads).clone()
    per_head[..., head] = 0.0
    return per_head.reshape(batch, seq, width)


def _only_that_head(concatenated, head, heads):
    return concatenated - ablate_head(concatenated, head, heads)


def _ablate_cases():
    concatenated = torch.randn(2, 3, 16, generator=seeded(114))  # 4 heads of d_k 4
    return [
        Case((concatenated, 1, 4), "4 heads of d_k = 4, head 1"),
        Case((concatenated, 3, 4), "the last head"),
        Case((concatenated, 0, 2), "2 heads of d_k = 8, head 0"),
        Case((concatenated[:, :1], 0, 1), "one head: everything is zeroed"),
    ]


@exercise(
    cases=_ablate_cases,
    mistakes=[
        Mistake(
            "the heads are concatenated one after another: head h owns columns h * d_k to "
            "(h + 1) * d_k - 1 (view as (batch, seq, heads, d_k)), not every heads-th column.",
            _strided,
        ),
        Mistake(
            "zero the one head and keep the others: you kept only that head.",
            _only_that_head,
        ),
    ],
)
def ablate_head(concatenated, head, heads):
    """Zero head ``head``'s d_k columns of the concatenated heads."""
    batch, seq, width = concatenated.shape
    per_head = concatenated.reshape(batch, seq, heads, width // heads).clone()
    per_head[:, :, head] = 0.0  # (batch, seq, heads, d_k)
    return per_head.reshape(batch, seq, width)
