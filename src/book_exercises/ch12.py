"""Chapter 12 exercises: Chinese numerals below 100,000, the search-error test, one beam step.

    from book_exercises import check
    check(chinese_numeral, device=device)

Each check calls the reader's function on small seeded inputs (edge cases included: numbers
with inner and trailing zeros and a leading or inner 十; ties between the right answer and
greedy's output; the first beam step, where only one prefix is alive) and compares it with
transformer_book.numerals.chinese_numeral or with the rule chapter 12 applies.
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise, seeded
from transformer_book import chinese_numeral

# ---------------------------------------------------------------------------------------------
# Exercise 1: Chinese numerals below 100,000

DIGITS = "零一二三四五六七八九"
UNITS = ("", "十", "百", "千", "万")


def _numeral(number, zeros="run", trailing=False, lone_ten="leading"):
    """chinese_numeral below 10^5, with the typical mistakes as switches: ``zeros`` "run"
    (one 零 per inner run), "none" or "digit" (one per zero digit); ``trailing`` (零 for the
    zeros at the end too); ``lone_ten`` "leading" (十二), "never" (一十二) or "always" (一百十)."""
    written = str(number)
    text, zeros_before = "", 0
    for index, character in enumerate(written):
        place = len(written) - 1 - index
        if character == "0":
            zeros_before += 1
            continue
        if zeros_before and zeros != "none":
            text += "零" * (zeros_before if zeros == "digit" else 1)
        zeros_before = 0
        drop_one = character == "1" and place == 1 and (lone_ten == "always" or (lone_ten == "leading" and not text))
        text += ("" if drop_one else DIGITS[int(character)]) + UNITS[place]
    if trailing and zeros_before and zeros != "none":
        text += "零" * (zeros_before if zeros == "digit" else 1)
    return text


def _numeral_cases():
    numbers = [12305, 7, 12, 1005, 40100, 10005, 1050, 20000, 110, 10010, 99999, 10, 16]
    return [Case((number,), f"{number:,}") for number in numbers]


exercise(
    task="1 <= number < 100000 -> its Chinese numeral (12305 -> 一万二千三百零五).",
    cases=_numeral_cases,
    mistakes=[
        Mistake(
            "write 零 for the zeros inside the number, which English never says: 1,005 is 一千零五, not 一千五.",
            lambda number: _numeral(number, zeros="none"),
        ),
        Mistake(
            "one 零 stands for a whole run of zeros: 10,005 is 一万零五, not 一万零零零五.",
            lambda number: _numeral(number, zeros="digit"),
        ),
        Mistake(
            "write no 零 for the zeros at the end of the number: 1,050 is 一千零五十, not "
            "一千零五十零 (and one 零 for a whole run of zeros inside it).",
            lambda number: _numeral(number, zeros="digit", trailing=True),
        ),
        Mistake(
            "write no 零 for the zeros at the end of the number: 1,050 is 一千零五十, not 一千零五十零.",
            lambda number: _numeral(number, trailing=True),
        ),
        Mistake(
            "a leading tens digit 1 is written 十 alone: 12 is 十二 and 16 is 十六, not 一十二; "
            "inside a number it keeps its 一 (110 is 一百一十).",
            lambda number: _numeral(number, lone_ten="never"),
        ),
        Mistake(
            "only a tens digit 1 that leads the number drops its 一: 110 is 一百一十 and "
            "10,010 is 一万零一十, not 一百十.",
            lambda number: _numeral(number, lone_ten="always"),
        ),
    ],
)(chinese_numeral)


# ---------------------------------------------------------------------------------------------
# Exercise 2: is it a search error?


def _search_cases():
    generator = seeded(121)
    reference = -torch.rand(6, 5, generator=generator) * 1.5  # (6, 5): 4 tokens and </s>
    greedy = -torch.rand(6, 8, generator=generator) * 0.6  # (6, 8): up to 8 tokens
    reference[:, 4:] = 0.0  # all right answers have 3 tokens and </s> ...
    reference[:, 3] = -0.1
    greedy[0, 3:] = 0.0  # a short greedy output
    reference[1] = torch.tensor([-0.5, -0.25, -0.125, -0.25, 0.0])  # exact in any order
    greedy[1, :5] = reference[1]  # greedy's output is the right answer: a tie
    greedy[1, 5:] = 0.0
    greedy[2, :] = -0.5  # a long greedy output (a loop to the length limit): -4
    greedy[3, 2:] = 0.0  # greedy's 2 tokens are more probable than the right answer
    greedy[3, :2] = -0.05
    return [
        Case((reference, greedy), "6 rows: right answers of width 5, greedy outputs of 8"),
        Case((reference[1:2], greedy[1:2]), "one row where greedy's output is the right one"),
        Case((reference[2:4], greedy[2:4, :4]), "two rows of equal width"),
    ]


@exercise(
    cases=_search_cases,
    mistakes=[
        Mistake(
            "a tie is no search error: where greedy's output is the right answer, both totals "
            "are equal; compare with a strict >.",
            lambda ref, greedy: ref.sum(dim=-1) >= greedy.sum(dim=-1),
        ),
        Mistake(
            "compare total log-probabilities (sums), as beam search ranks them; a mean divides "
            "by the padded width, which differs between the two and says nothing about the "
            "output.",
            lambda ref, greedy: ref.mean(dim=-1) > greedy.mean(dim=-1),
        ),
        Mistake(
            "a search error is where the right answer is the MORE probable one: the model "
            "prefers it, and greedy missed it.",
            lambda ref, greedy: ref.sum(dim=-1) < greedy.sum(dim=-1),
        ),
        Mistake(
            "compare whole outputs (the sum over every token), not their first tokens: greedy's "
            "first token is always the most probable one.",
            lambda ref, greedy: ref[..., 0] > greedy[..., 0],
        ),
    ],
)
def search_error(reference_log_probs, greedy_log_probs):
    """True where the right answer's total log-probability is higher than greedy's."""
    return reference_log_probs.sum(dim=-1) > greedy_log_probs.sum(dim=-1)


# ---------------------------------------------------------------------------------------------
# Exercise 3: one step of beam search


def _best_per_beam(scores, log_probs, beam_size):
    best_scores, token = (scores.unsqueeze(-1) + log_probs).max(dim=-1)  # (batch, beam)
    vocab = log_probs.size(-1)
    return best_scores, token // vocab, token % vocab


def _swapped_index(scores, log_probs, beam_size):
    best_scores, origin, token = beam_step(scores, log_probs, beam_size)
    return best_scores, token, origin


def _beam_cases():
    generator = seeded(122)
    log_probs = torch.randn(2, 3, 6, generator=generator).log_softmax(-1)  # (2, 3, 6)
    scores = -torch.rand(2, 3, generator=generator) * 3  # (2, 3)
    first = torch.tensor([[0.0, float("-inf"), float("-inf")]])  # only <s> is alive
    return [
        Case((scores, log_probs, 3), "2 sources, 3 beams, a vocabulary of 6"),
        Case((first, log_probs[:1], 3), "the first step: beams 1 and 2 at -inf"),
        Case((scores, log_probs, 1), "beam_size 1 (greedy decoding)"),
    ]


@exercise(
    cases=_beam_cases,
    mistakes=[
        Mistake(
            "add each prefix's score: a candidate's score is its prefix's total "
            "log-probability plus its new token's log-probability.",
            lambda scores, lp, k: beam_step(torch.zeros_like(scores), lp, k),
        ),
        Mistake(
            "the flat index of (beam, token) is beam * vocab + token: the beam is index // "
            "vocab and the token index % vocab.",
            _swapped_index,
        ),
        Mistake(
            "take the beam_size best of all beam x vocab candidates together (flatten them): "
            "two of the best may extend the same prefix, and a prefix may have no successor.",
            _best_per_beam,
        ),
    ],
)
def beam_step(scores, log_probs, beam_size):
    """The beam_size best (score, origin beam, token) of all beam x vocab candidates."""
    vocab = log_probs.size(-1)
    candidates = scores.unsqueeze(-1) + log_probs  # (batch, beam, vocab)
    best_scores, best = candidates.flatten(1).topk(beam_size, dim=-1)
    return best_scores, best // vocab, best % vocab
