"""Chapter 14 exercises: BLEU's brevity penalty, clipped n-gram matches, chrF by hand.

    from book_exercises import check
    check(brevity_penalty, device=device)

Every check calls the reader's function on small fixed inputs (edge cases included: outputs
longer than their references, a tie between two reference lengths, an n-gram repeated more often
than any reference has it, an output shorter than the n-gram order) and compares it with sacrebleu.
"""

from __future__ import annotations

import math
from collections import Counter

import torch

from book_exercises.core import Case, Mistake, exercise

# ---------------------------------------------------------------------------------------------
# Exercise 1: BLEU's brevity penalty


def _closest(output: int, lengths, tie="shorter"):
    """The reference length closest to ``output``; a tie goes to the shorter (sacrebleu)."""
    sign = 1 if tie == "shorter" else -1
    return min(lengths, key=lambda length: (abs(length - output), sign * length))


def _penalty(outputs, references, pick="closest", rule="right", per_sentence=False):
    """The brevity penalty as a float64 tensor, with the typical mistakes as switches:
    ``pick`` the reference length ("closest", "closest-longer" on a tie, "longest",
    "shortest", "mean"), ``rule`` the formula ("right", "inverted", "both ways",
    "uncapped"), ``per_sentence`` (the mean of each sentence's penalty)."""
    if per_sentence:
        values = [float(_penalty([output], [lengths], pick, rule)) for output, lengths in zip(outputs, references)]
        return torch.tensor(sum(values) / len(values), dtype=torch.float64)
    choose = {
        "closest": lambda output, lengths: _closest(output, lengths),
        "closest-longer": lambda output, lengths: _closest(output, lengths, "longer"),
        "longest": lambda output, lengths: max(lengths),
        "shortest": lambda output, lengths: min(lengths),
        "mean": lambda output, lengths: sum(lengths) / len(lengths),
    }[pick]
    c = sum(outputs)
    r = sum(choose(output, lengths) for output, lengths in zip(outputs, references))
    if rule == "uncapped":
        value = math.exp(1 - r / c)
    elif rule == "both ways":
        value = math.exp(1 - max(c, r) / min(c, r))
    elif c >= r:
        value = 1.0
    else:
        value = math.exp(1 - (c / r if rule == "inverted" else r / c))
    return torch.tensor(value, dtype=torch.float64)


def _as_number(got):
    """The reader's penalty (a float, or a one-element tensor) as a float64 tensor."""
    try:
        return torch.tensor(float(got), dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return got


def _a_number(what: str, returned: str) -> dict:
    """How a score is checked: as a float64 tensor, within 1e-9 of sacrebleu's, and the message
    when it is not (``what`` it is, "the penalty", and how the reader returns it)."""

    def describe(got, expected, case):
        if not isinstance(got, torch.Tensor):
            return f"return {what} as {returned}; got {type(got).__name__}"
        return f"on {case.label}, {what} is {float(expected):.4f}; got {float(got):.4f}"

    return dict(normalize=_as_number, describe=describe, atol=1e-9, rtol=1e-9)


def _penalty_cases():
    return [
        Case(([3, 7, 4, 5], [[4, 9], [4, 8], [6], [3, 7]]),
             "4 outputs of 19 characters, references of 3 to 9"),
        Case(([2], [[5, 9]]), "one output of 2 characters, references of 5 and 9"),
        Case(([10, 8], [[6, 9], [5]]), "outputs longer than their closest references"),
        Case(([2, 10], [[4], [5]]), "one short and one long output, 12 against 9"),
        Case(([6, 6], [[6], [6, 8]]), "outputs exactly as long as their closest references"),
    ]  # fmt: skip


@exercise(
    cases=_penalty_cases,
    success="matches sacrebleu's brevity penalty",
    **_a_number("the penalty", "a number (a float)"),
    mistakes=[
        Mistake(
            "the ratio is inverted: the penalty is exp(1 - r/c), reference length over output "
            "length. An output half as long as its references gets exp(1 - 2) = 0.37; with "
            "c/r it would get exp(1 - 0.5), no real penalty.",
            lambda c, r: _penalty(c, r, rule="inverted"),
        ),
        Mistake(
            "BLEU penalises only outputs that are too short: a long output already loses "
            "precision (its extra n-grams match nothing), so the penalty is 1 when c >= r.",
            lambda c, r: _penalty(c, r, rule="both ways"),
        ),
        Mistake(
            "the penalty is never above 1: it is 1 when the output is at least as long as the "
            "references (c >= r), and exp(1 - r/c) only when c < r.",
            lambda c, r: _penalty(c, r, rule="uncapped"),
        ),
        Mistake(
            "use, for each sentence, the reference length closest to its output's length, not "
            "the longest reference: a second, longer translation must not make every output "
            "look short.",
            lambda c, r: _penalty(c, r, pick="longest"),
        ),
        Mistake(
            "use, for each sentence, the reference length closest to its output's length, not the shortest one.",
            lambda c, r: _penalty(c, r, pick="shortest"),
        ),
        Mistake(
            "use the closest reference length, not the mean of the reference lengths.",
            lambda c, r: _penalty(c, r, pick="mean"),
        ),
        Mistake(
            "on a tie (two references equally close to the output), take the shorter "
            "reference length, as sacrebleu does: an output of 5 against references of 3 and "
            "7 counts r = 3.",
            lambda c, r: _penalty(c, r, pick="closest-longer"),
        ),
        Mistake(
            "corpus BLEU sums the lengths over the whole corpus first (c and r), then computes "
            "one penalty; do not average the sentences' penalties.",
            lambda c, r: _penalty(c, r, per_sentence=True),
        ),
    ],
)
def brevity_penalty(hypothesis_lengths, reference_lengths):
    """Corpus BLEU's brevity penalty from output and reference lengths.

    sacrebleu's brevity penalty for outputs and references of these lengths (in characters)."""
    from sacrebleu.metrics import BLEU

    most = max(len(lengths) for lengths in reference_lengths)
    streams = [["的" * lengths[k] if k < len(lengths) else None for lengths in reference_lengths] for k in range(most)]
    hypotheses = ["的" * length for length in hypothesis_lengths]
    score = BLEU(tokenize="zh").corpus_score(hypotheses, streams)
    return torch.tensor(score.bp, dtype=torch.float64)


# ---------------------------------------------------------------------------------------------
# Exercise 3: clipped n-gram matches (BLEU's modified precision)


def _ngrams(text: str, n: int) -> Counter:
    return Counter(text[i : i + n] for i in range(len(text) - n + 1))


def _matches(hypothesis, references, n, clip="max", which="all", distinct=False):
    """(matched, total) with the typical mistakes: ``clip`` "max" (the largest count in one
    reference), "sum" (the counts added over the references) or "none"; ``which`` "all" or
    "first" reference; ``distinct`` (each distinct n-gram once)."""
    counts = _ngrams(hypothesis, n)
    if distinct:
        counts = Counter(dict.fromkeys(counts, 1))
    allowed = Counter()
    for reference in references if which == "all" else references[:1]:
        if clip == "sum":
            allowed += _ngrams(reference, n)
        else:
            allowed |= _ngrams(reference, n)
    if clip == "none":
        matched = sum(count for gram, count in counts.items() if gram in allowed)
    else:
        matched = sum(min(count, allowed[gram]) for gram, count in counts.items())
    return matched, sum(counts.values())


def _as_pair(got):
    """The reader's (matched, total) as a tuple of two ints (tensors and floats accepted)."""
    try:
        matched, total = got
        if float(matched) == int(matched) and float(total) == int(total):
            return int(matched), int(total)
    except (TypeError, ValueError, RuntimeError):
        pass
    return got


def _describe_matches(got, expected, case):
    if not (isinstance(got, tuple) and len(got) == 2):
        return f"return two integers, (matched, total); got {got!r}"
    return f"on {case.label}, expected (matched, total) = {expected}; got {got}"


def _matches_cases():
    return [
        Case(("的的的的", ["我的书", "这是我的"], 1), "的的的的 against 我的书 and 这是我的, n = 1"),
        Case(("我我喜欢你你", ["我喜欢你", "我我爱你"], 1), "我我喜欢你你, two references, n = 1"),
        Case(("猫坐在垫子上", ["猫在垫子上", "一只猫坐在垫子上"], 2), "bigrams, two references"),
        Case(("汤姆在这里。", ["汤姆在这儿。"], 3), "trigrams, one reference"),
        Case(("好", ["好的"], 2), "an output shorter than n"),
    ]  # fmt: skip


@exercise(
    cases=_matches_cases,
    success="matches sacrebleu's counts",
    normalize=_as_pair,
    describe=_describe_matches,
    mistakes=[
        Mistake(
            "clip the matches: an n-gram counts at most as often as it occurs in a reference. "
            "的的的的 against 我的书 matches 1 of its 4 unigrams, not 4 (else repeating a likely "
            "character would score perfectly).",
            lambda h, refs, n: _matches(h, refs, n, clip="none"),
        ),
        Mistake(
            "clip by the largest count in any ONE reference, not by the counts added over all "
            "references: 的 occurs once in each of 我的书 and 这是我的, so 的的的的 matches 1.",
            lambda h, refs, n: _matches(h, refs, n, clip="sum"),
        ),
        Mistake(
            "use every reference: an n-gram matches if some reference has it, and the clip is "
            "the largest count among them.",
            lambda h, refs, n: _matches(h, refs, n, which="first"),
        ),
        Mistake(
            "count every occurrence of an n-gram, not each distinct n-gram once: the total is "
            "the number of n-grams in the hypothesis, len(hypothesis) - n + 1.",
            lambda h, refs, n: _matches(h, refs, n, distinct=True),
        ),
    ],
)
def clipped_matches(hypothesis, references, n):
    """(matched, total) n-grams of the hypothesis, each match clipped by the references.

    sacrebleu's (matched, total) n-grams of one sentence, over characters."""
    from sacrebleu.metrics import BLEU

    parts = BLEU(tokenize="zh", effective_order=True).sentence_score(hypothesis, references)
    return parts.counts[n - 1], parts.totals[n - 1]


# ---------------------------------------------------------------------------------------------
# Exercise 3: chrF, the character n-gram F-score


def _chrf(
    hypothesis, reference, beta=2.0, orders=6, spaces=False, clip=True, mean="scores", over="effective", swap=False
):
    """Sentence chrF in percent, with the typical mistakes as switches: ``beta``, ``orders`` (the
    largest n), ``spaces`` (kept), ``clip`` (False: every n-gram of the output found in the
    reference matches), ``mean`` "scores" (the precisions and recalls averaged first, then one
    F-score) or "f" (the F-scores of the orders averaged), ``over`` "effective" or "all" orders,
    ``swap`` (precision and recall exchanged in the F-score)."""
    if not spaces:
        hypothesis, reference = "".join(hypothesis.split()), "".join(reference.split())
    precisions, recalls, f_scores = [], [], []
    for n in range(1, orders + 1):
        output, wanted = _ngrams(hypothesis, n), _ngrams(reference, n)
        if clip:
            matched = sum(min(count, wanted[gram]) for gram, count in output.items())
        else:
            matched = sum(count for gram, count in output.items() if gram in wanted)
        if not output or not wanted:
            if over == "all":
                precisions.append(0.0)
                recalls.append(0.0)
                f_scores.append(0.0)
            continue
        precision, recall = matched / sum(output.values()), matched / sum(wanted.values())
        precisions.append(precision)
        recalls.append(recall)
        f_scores.append(_f_score(precision, recall, beta, swap))
    if not precisions:
        return torch.tensor(0.0, dtype=torch.float64)
    if mean == "f":
        return torch.tensor(100 * sum(f_scores) / len(f_scores), dtype=torch.float64)
    precision, recall = sum(precisions) / len(precisions), sum(recalls) / len(recalls)
    return torch.tensor(100 * _f_score(precision, recall, beta, swap), dtype=torch.float64)


def _f_score(precision, recall, beta, swap=False):
    if swap:
        precision, recall = recall, precision
    if precision + recall == 0:
        return 0.0
    return (1 + beta**2) * precision * recall / (beta**2 * precision + recall)


def _chrf_cases():
    return [
        Case(("他供认了罪行。", "他供认了杀人的罪行。"), "他供认了罪行。 against 他供认了杀人的罪行。"),
        Case(("汤姆在这儿。", "汤姆在这里。"), "汤姆在这儿。 against 汤姆在这里。"),
        Case(("我们走吧我们走吧", "我们走吧"), "我们走吧我们走吧 (said twice) against 我们走吧"),
        Case(("the cat sat", "the cat sat on the mat"), "'the cat sat' against 'the cat sat on the mat'"),
        Case(("我饿", "我很饿了"), "我饿 against 我很饿了 (no 3-grams in the output)"),
        Case(("是的，我很好。", "是。"), "是的，我很好。 against 是。"),
        Case(("猫", "狗"), "猫 against 狗 (nothing matches)"),
    ]


@exercise(
    cases=_chrf_cases,
    success="matches sacrebleu's chrF",
    **_a_number("chrF", "a number (a float, in percent)"),
    mistakes=[
        Mistake(
            "chrF weights recall twice as much as precision: the F-score with beta = 2, "
            "(1 + 4) P R / (4 P + R), not the F1 score 2 P R / (P + R).",
            lambda h, r: _chrf(h, r, beta=1.0),
        ),
        Mistake(
            "in (1 + beta^2) P R / (beta^2 P + R) the beta^2 multiplies the PRECISION in the "
            "denominator, which makes recall the one that counts more; you weighted precision.",
            lambda h, r: _chrf(h, r, swap=True),
        ),
        Mistake(
            "remove the spaces before taking the character n-grams (chrF ignores whitespace): "
            "'cat sat' gives the 2-grams ca, at, ts, sa, at.",
            lambda h, r: _chrf(h, r, spaces=True),
        ),
        Mistake(
            "clip the matches: an n-gram of the output matches at most as often as the "
            "reference has it (saying 我们走吧 twice does not match twice).",
            lambda h, r: _chrf(h, r, clip=False),
        ),
        Mistake(
            "n goes from 1 to 6 for chrF (BLEU stops at 4).",
            lambda h, r: _chrf(h, r, orders=4),
        ),
        Mistake(
            "sacrebleu averages the precisions and the recalls over n first, then computes ONE "
            "F-score from the two means; you averaged the F-scores of each n.",
            lambda h, r: _chrf(h, r, mean="f"),
        ),
        Mistake(
            "average over the orders n that have n-grams on both sides: a 2-character output "
            "has no 3-grams, and those orders must not count as zeros.",
            lambda h, r: _chrf(h, r, over="all"),
        ),
    ],
)
def chrf(hypothesis, reference):
    """Sentence chrF: precision and recall of character 1- to 6-grams, F-score with beta 2."""
    from sacrebleu.metrics import CHRF

    score = CHRF().sentence_score(hypothesis, [reference]).score
    return torch.tensor(score, dtype=torch.float64)
