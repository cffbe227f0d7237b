"""Chapter 15 exercises: min-p sampling, the repetition penalty, no repeated n-grams.

    from book_exercises import check
    check(min_p, device=device)

Three edits of the next token's logits that ``Poet.write`` does not make, each checked against
the logits processor of Hugging Face's ``transformers`` that does it (MinPLogitsWarper,
RepetitionPenaltyLogitsProcessor, NoRepeatNGramLogitsProcessor), on seeded logits of a few rows.
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise, randn, seeded

INF = float("-inf")


def _processed(processor, previous, logits):
    """What a transformers logits processor makes of ``logits`` after ``previous`` (a copy)."""
    return processor(previous.clone(), logits.clone())


# ---------------------------------------------------------------------------------------------
# Exercise 1: min-p


def _cut(logits, keep, fill=INF):
    return logits.masked_fill(~keep, fill)


def _min_p_cases():
    peaked = randn(2, 10, seed=152, scale=3.0)
    peaked[1, 4] = 9.0  # one token holds almost all the probability
    return [
        Case((randn(3, 12, seed=151, scale=2.0), 0.1), "3 rows of 12 logits, min_p 0.1"),
        Case((randn(3, 12, seed=151, scale=2.0), 0.5), "the same logits, min_p 0.5"),
        Case((peaked, 0.05), "2 rows of 10, the second with one dominant token, min_p 0.05"),
        Case((randn(4, 6, seed=153, scale=0.3), 0.9), "4 flat rows of 6, min_p 0.9"),
    ]


@exercise(
    cases=_min_p_cases,
    success="matches transformers' MinPLogitsWarper",
    mistakes=[
        Mistake(
            "scale the threshold by the top probability of the row: keep a token when its "
            "probability is at least min_p x the likeliest token's, not min_p itself (so the "
            "cut adapts: strict when the model is sure, lenient when it hesitates).",
            lambda logits, p: _cut(logits, logits.softmax(-1) >= p),
        ),
        Mistake(
            "compare probabilities, not logits: min_p x the top PROBABILITY (softmax first); "
            "logits can be negative, and their ratios mean nothing.",
            lambda logits, p: _cut(logits, logits >= p * logits.amax(-1, keepdim=True)),
        ),
        Mistake(
            "each row has its own likeliest token: take the maximum along the vocabulary "
            "(amax(dim=-1, keepdim=True)), not over the whole batch.",
            lambda logits, p: _cut(logits, logits.softmax(-1) >= p * logits.softmax(-1).max()),
        ),
        Mistake(
            "the softmax runs over the vocabulary (dim=-1), one distribution per row, not over the batch (dim=0).",
            lambda logits, p: _cut(logits, logits.softmax(0) >= p * logits.softmax(0).amax(-1, keepdim=True)),
        ),
        Mistake(
            "set the dropped logits to -inf, not to 0: exp(0) = 1 still gives them a share of the probability.",
            lambda logits, p: _cut(
                logits, logits.softmax(-1) >= p * logits.softmax(-1).amax(-1, keepdim=True), fill=0.0
            ),
        ),
    ],
)
def min_p(logits, min_p):
    """-inf where a token's probability is below min_p x its row's top probability."""
    from transformers.generation.logits_process import MinPLogitsWarper

    previous = torch.zeros(len(logits), 1, dtype=torch.long)  # min-p does not read it
    return _processed(MinPLogitsWarper(min_p), previous, logits)


# ---------------------------------------------------------------------------------------------
# Exercise 2: the repetition penalty


def _seen(logits, previous):
    return torch.zeros_like(logits, dtype=torch.bool).scatter(1, previous, True)


def _penalized(logits, previous, penalized, where=None):
    where = _seen(logits, previous) if where is None else where
    return torch.where(where, penalized, logits)


def _repetition_cases():
    previous = torch.randint(0, 12, (3, 9), generator=seeded(154))
    previous[0, 5:] = previous[0, 0]  # one token said five times
    return [
        Case(
            (randn(3, 12, seed=155, scale=2.0), previous, 1.3), "3 rows of 12 logits after 9 tokens each, penalty 1.3"
        ),
        Case((randn(3, 12, seed=156, scale=2.0), previous, 2.0), "other logits, penalty 2.0"),
        Case((randn(3, 12, seed=155, scale=2.0), previous[:, :2], 1.5), "after 2 tokens each, penalty 1.5"),
    ]


@exercise(
    cases=_repetition_cases,
    success="matches transformers' RepetitionPenaltyLogitsProcessor",
    mistakes=[
        Mistake(
            "dividing a NEGATIVE logit by the penalty brings it closer to 0, which makes the "
            "token MORE likely: divide the positive logits, multiply the negative ones.",
            lambda logits, previous, penalty: _penalized(logits, previous, logits / penalty),
        ),
        Mistake(
            "you made repeated tokens more likely: a positive logit is DIVIDED by the penalty "
            "(> 1), a negative one multiplied by it.",
            lambda logits, previous, penalty: _penalized(
                logits, previous, torch.where(logits > 0, logits * penalty, logits / penalty)
            ),
        ),
        Mistake(
            "the penalty is applied once per token that occurred, however often it occurred "
            "(CTRL's rule; a penalty growing with the count is the frequency penalty).",
            lambda logits, previous, penalty: _penalized(
                logits,
                previous,
                torch.where(
                    logits > 0,
                    logits / penalty ** _counts(logits, previous),
                    logits * penalty ** _counts(logits, previous),
                ),
            ),
        ),
        Mistake(
            "the repetition penalty scales the logit (divide a positive one, multiply a "
            "negative one); subtracting a constant is another rule, the presence penalty.",
            lambda logits, previous, penalty: _penalized(logits, previous, logits - penalty),
        ),
        Mistake(
            "penalize the tokens that DID occur in the row's previous tokens, and leave the others as they are.",
            lambda logits, previous, penalty: _penalized(
                logits,
                previous,
                torch.where(logits > 0, logits / penalty, logits * penalty),
                where=~_seen(logits, previous),
            ),
        ),
    ],
)
def repetition_penalty(logits, previous, penalty):
    """Seen tokens: positive logits / penalty, negative logits x penalty (CTRL's rule)."""
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    return _processed(RepetitionPenaltyLogitsProcessor(penalty), previous, logits)


def _counts(logits, previous):
    """(batch, vocab): how often each token occurs in its row of ``previous``."""
    ones = torch.ones_like(previous, dtype=logits.dtype)
    return torch.zeros_like(logits).scatter_add(1, previous, ones)


# ---------------------------------------------------------------------------------------------
# Exercise 3: no repeated n-gram


def _banned(logits, previous, n, prefix=None, first_only=False):
    """Logits with -inf for the tokens that follow an earlier occurrence of the row's last
    ``prefix`` tokens (n - 1 when right); ``first_only``: only after the first occurrence."""
    prefix = n - 1 if prefix is None else prefix
    logits = logits.clone()
    for row, tokens in enumerate(previous.tolist()):
        last = tuple(tokens[len(tokens) - prefix :]) if prefix else ()
        for start in range(len(tokens) - prefix):
            if tuple(tokens[start : start + prefix]) == last:
                logits[row, tokens[start + prefix]] = INF
                if first_only:
                    break
    return logits


def _no_repeat_cases():
    logits = randn(2, 8, seed=157, scale=2.0)
    verses = torch.tensor(
        [
            [1, 2, 3, 4, 2, 3, 5, 2, 3],  # 2 3 followed by 4, then by 5
            [6, 6, 7, 1, 6, 7, 0, 1, 6],
        ]
    )  # 1 6 after 6 7 earlier
    return [
        Case((logits, verses, 3), "2 rows of 9 tokens, trigrams"),
        Case((logits, verses, 2), "the same rows, bigrams"),
        Case((logits, verses[:, :2], 3), "2 tokens per row, trigrams (none complete yet)"),
        Case(
            (logits, torch.tensor([[4, 5, 6, 1, 4, 5, 6, 2, 4, 5, 6], [7] * 11]), 4),
            "4-grams after 4 5 6 1 4 5 6 2 4 5 6 and after 7 said 11 times",
        ),
    ]


@exercise(
    cases=_no_repeat_cases,
    success="matches transformers' NoRepeatNGramLogitsProcessor",
    mistakes=[
        Mistake(
            "look for the row's last n - 1 tokens (the n-gram's first part), and ban what "
            "followed them: you matched the last n tokens, so you guard (n + 1)-grams.",
            lambda logits, previous, n: _banned(logits, previous, n, prefix=n),
        ),
        Mistake(
            "a token is banned only where it would complete a repeated n-gram: it follows an "
            "earlier occurrence of the last n - 1 tokens; a token seen anywhere is still allowed.",
            lambda logits, previous, n: _banned(logits, previous, n, prefix=0),
        ),
        Mistake(
            "the last n - 1 tokens can occur several times earlier: ban the token that "
            "followed EACH occurrence, not only the first.",
            lambda logits, previous, n: _banned(logits, previous, n, first_only=True),
        ),
        Mistake(
            "set the banned logits to -inf, not to 0: exp(0) = 1 still leaves them a share of the probability.",
            lambda logits, previous, n: torch.where(
                _banned(logits, previous, n) == INF, torch.zeros_like(logits), logits
            ),
        ),
    ],
)
def no_repeat_ngram(logits, previous, n):
    """-inf for each token that would complete an n-gram the row already holds."""
    from transformers.generation.logits_process import NoRepeatNGramLogitsProcessor

    return _processed(NoRepeatNGramLogitsProcessor(n), previous, logits)
