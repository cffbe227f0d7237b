"""Chapter 10 exercises: one greedy step, the length penalty, top-p (nucleus) filtering.

    from book_exercises import check
    check(greedy_step, device=device)

Each check calls the reader's function on small seeded inputs (edge cases included) and compares
it with the package's length_penalized (transformer_book.beam) and top_p_filter
(transformer_book.decoding), or with the rule of its greedy_decode (one step: argmax, append,
an ended sequence repeats its end token).
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise, seeded
from transformer_book import length_penalized, top_p_filter

# ---------------------------------------------------------------------------------------------
# Exercise 1: one step of greedy decoding


def _greedy_cases():
    generator = seeded(101)
    log_probs = torch.randn(4, 9, generator=generator).log_softmax(-1)  # (4, 9)
    log_probs[1, 2] = 5.0  # row 1's most probable token is the end token (2)
    log_probs[3, 7] = 5.0  # row 3 has ended already, but prefers token 7
    tokens = torch.tensor([[1, 5, 6], [1, 4, 4], [1, 8, 3], [1, 6, 2]])  # row 3 ended
    every_ended = torch.tensor([[1, 2], [1, 2]])
    return [
        Case((log_probs, tokens, 2), "4 sequences of 3 tokens, one already ended"),
        Case((log_probs[:1], tokens[:1, :1], 2), "the first step: only the start token"),
        Case((log_probs[2:], every_ended, 2), "every sequence ended"),
    ]


@exercise(
    cases=_greedy_cases,
    mistakes=[
        Mistake(
            "a sequence whose last token is end_id has ended: it must only repeat end_id, whatever the model prefers.",
            lambda lp, tokens, end: torch.cat([tokens, lp.argmax(-1).unsqueeze(1)], dim=1),
        ),
        Mistake(
            "append the new token at the end of each sequence (after tokens, along dim 1), not in front.",
            lambda lp, tokens, end: torch.cat([greedy_step(lp, tokens, end)[:, -1:], tokens], dim=1),
        ),
        Mistake(
            "return the whole sequences (batch, t + 1), not only the new tokens.",
            lambda lp, tokens, end: greedy_step(lp, tokens, end)[:, -1],
        ),
    ],
)
def greedy_step(log_probs, tokens, end_id):
    """Append each row's most probable token; an ended row repeats end_id."""
    next_token = log_probs.argmax(dim=-1)  # (batch,)
    next_token = next_token.masked_fill(tokens[:, -1] == end_id, end_id)
    return torch.cat([tokens, next_token.unsqueeze(1)], dim=1)  # (batch, t + 1)


# ---------------------------------------------------------------------------------------------
# Exercise 2: the length penalty


def _penalty_cases():
    scores = -torch.rand(2, 4, generator=seeded(102)) * 10  # (2, 4) total log-probs
    lengths = torch.tensor([[1.0, 3.0, 8.0, 12.0], [2.0, 2.0, 5.0, 30.0]])
    return [
        Case((scores, lengths, 0.6), "alpha 0.6 (the paper's), lengths 1 to 30"),
        Case((scores, lengths, 2.0), "alpha 2"),
        Case((scores, lengths, 0.0), "alpha 0: no penalty"),
    ]


exercise(
    task="score / ((5 + length) / 6) ** alpha.",
    cases=_penalty_cases,
    mistakes=[
        Mistake(
            "that is plain length normalisation, score / length ** alpha; Wu et al.'s "
            "penalty divides by ((5 + length) / 6) ** alpha, which is 1 for a 1-token output.",
            lambda scores, lengths, alpha: scores / lengths**alpha,
        ),
        Mistake(
            "divide the score by the penalty: the scores are negative, and dividing by a "
            "number above 1 is what makes a long output's score less negative.",
            lambda scores, lengths, alpha: scores * ((5 + lengths) / 6) ** alpha,
        ),
        Mistake(
            "raise ((5 + length) / 6) to the power alpha: alpha 0 must leave the scores as they are.",
            lambda scores, lengths, alpha: scores / ((5 + lengths) / 6),
        ),
    ],
)(length_penalized)


# ---------------------------------------------------------------------------------------------
# Exercise 3: top-p (nucleus) filtering


def _unsorted_nucleus(logits, top_p):
    probabilities = logits.softmax(dim=-1)
    drop = probabilities.cumsum(dim=-1) - probabilities >= top_p
    return logits.masked_fill(drop, float("-inf"))


def _drop_the_crossing_token(logits, top_p):
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    drop_sorted = sorted_logits.softmax(dim=-1).cumsum(dim=-1) > top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def _left_sorted(logits, top_p):
    return top_p_filter(logits, top_p).sort(dim=-1, descending=True).values


def _top_p_cases():
    logits = torch.randn(3, 8, generator=seeded(103)) * 2  # (3, 8), no ties
    return [
        Case((logits, 0.9), "3 rows of 8 logits, top_p 0.9"),
        Case((logits, 0.5), "top_p 0.5"),
        Case((logits, 0.01), "top_p 0.01: only the most probable token"),
        Case((logits[0], 1.0), "one row of shape (vocab,), top_p 1: keep everything"),
    ]


exercise(
    task="-inf outside the smallest set of likeliest tokens whose mass reaches top_p.",
    cases=_top_p_cases,
    mistakes=[
        Mistake(
            "sort the probabilities from most to least probable before you sum them: the "
            "nucleus is made of the likeliest tokens, not of the first ones in the vocabulary.",
            _unsorted_nucleus,
        ),
        Mistake(
            "keep the token whose probability carries the sum past top_p: the nucleus is the "
            "smallest set whose mass reaches top_p, so drop a token only when the tokens "
            "before it already reach top_p (otherwise a confident row can lose every token).",
            _drop_the_crossing_token,
        ),
        Mistake(
            "return the logits in their original order (scatter the kept positions back); yours are still sorted.",
            _left_sorted,
        ),
    ],
)(top_p_filter)
