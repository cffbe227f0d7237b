"""Chapter 14 exercises: BLEU's brevity penalty, averaging checkpoints, clipped n-gram matches.

    from book_exercises.ch14 import check_brevity_penalty
    check_brevity_penalty(brevity_penalty)

Every checker calls the reader's function on small fixed inputs (edge cases included: outputs
longer than their references, a tie between two reference lengths, one checkpoint, an n-gram
repeated more often than any reference has it) and compares it with the rule sacrebleu applies
(for BLEU) or with transformer_book.translation.average_checkpoints.
"""

from __future__ import annotations

import math
from collections import Counter

import torch

from book_exercises.core import Case, Exercise, Mistake, run, seeded
from transformer_book.translation import average_checkpoints

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
        values = [
            float(_penalty([output], [lengths], pick, rule))
            for output, lengths in zip(outputs, references)
        ]
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


def _brevity_penalty(hypothesis_lengths, reference_lengths):
    return _penalty(hypothesis_lengths, reference_lengths)


def _as_number(got):
    """The reader's penalty (a float, or a one-element tensor) as a float64 tensor."""
    try:
        return torch.tensor(float(got), dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return got


def _describe_penalty(got, expected, case):
    if not isinstance(got, torch.Tensor):
        return f"return the penalty as a number (a float); got {type(got).__name__}"
    return f"on {case.label}, the penalty is {float(expected):.4f}; got {float(got):.4f}"


def _penalty_cases():
    return [
        Case(([3, 7, 4, 5], [[4, 9], [4, 8], [6], [3, 7]]),
             "4 outputs of 19 characters, references of 3 to 9"),
        Case(([2], [[5, 9]]), "one output of 2 characters, references of 5 and 9"),
        Case(([10, 8], [[6, 9], [5]]), "outputs longer than their closest references"),
        Case(([2, 10], [[4], [5]]), "one short and one long output, 12 against 9"),
        Case(([6, 6], [[6], [6, 8]]), "outputs exactly as long as their closest references"),
    ]  # fmt: skip


BREVITY_PENALTY = Exercise(
    name="brevity_penalty",
    task="corpus BLEU's brevity penalty from output and reference lengths.",
    cases=_penalty_cases,
    reference=_brevity_penalty,
    normalize=_as_number,
    describe=_describe_penalty,
    atol=1e-9,
    rtol=1e-9,
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
            "use, for each sentence, the reference length closest to its output's length, not "
            "the shortest one.",
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


def check_brevity_penalty(function, device=None):
    """Check ``function(hypothesis_lengths, reference_lengths) -> float``."""
    return run(BREVITY_PENALTY, function, device)


# ---------------------------------------------------------------------------------------------
# Exercise 2: averaging checkpoints


def _as_items(state):
    """A state dict as a tuple of (name, tensor) pairs sorted by name, on the CPU, so that the
    comparison sees every name; anything else is returned as it is."""
    if not isinstance(state, dict):
        return state
    return tuple(
        (name, value.detach().cpu() if isinstance(value, torch.Tensor) else value)
        for name, value in sorted(state.items())
    )


def _average(checkpoints, how="mean", keys=None):
    """The mean of state dicts as (name, tensor) pairs, with the typical mistakes: ``how``
    "sum", "halving" (a running mean of two), "five" (divided by 5), "last"; ``keys`` a
    filter on the names."""
    names = [name for name in checkpoints[0] if keys is None or keys(name)]
    averaged = {}
    for name in names:
        values = [checkpoint[name] for checkpoint in checkpoints]
        if how == "sum":
            averaged[name] = sum(values)
        elif how == "halving":
            running = values[0]
            for value in values[1:]:
                running = (running + value) / 2
            averaged[name] = running
        elif how == "five":
            averaged[name] = sum(values) / 5
        elif how == "last":
            averaged[name] = values[-1]
        else:
            averaged[name] = sum(values) / len(values)
    return _as_items(averaged)


def _describe_average(got, expected, case):
    if not isinstance(got, tuple):
        return f"return a state dict (a dict of name -> tensor); got {type(got).__name__}"
    names, wanted = [name for name, _ in got], [name for name, _ in expected]
    if names != wanted:
        missing = sorted(set(wanted) - set(names))
        extra = sorted(set(names) - set(wanted))
        return f"on {case.label}, the names differ: missing {missing}, unexpected {extra}"
    return None


def _checkpoint_cases():
    generator = seeded(141)

    def state():
        return {
            "embed.weight": torch.randn(5, 4, generator=generator),
            "layer.linear.weight": torch.randn(4, 4, generator=generator),
            "layer.linear.bias": torch.randn(4, generator=generator),
            "layer.norm.bias": torch.randn(4, generator=generator),
        }

    three = [state() for _ in range(3)]
    five = [state() for _ in range(5)]
    return [
        Case((three,), "3 checkpoints of 4 tensors each"),
        Case((three[:1],), "a single checkpoint"),
        Case((five,), "5 checkpoints, as in the paper"),
        Case((three[:2],), "2 checkpoints"),
    ]


AVERAGE_CHECKPOINTS = Exercise(
    name="average_checkpoints",
    task="the element-wise mean of a list of state dicts, for every name.",
    cases=_checkpoint_cases,
    reference=lambda checkpoints: _as_items(average_checkpoints(checkpoints)),
    normalize=_as_items,
    describe=_describe_average,
    mistakes=[
        Mistake(
            "divide the sum by the number of checkpoints: a sum of 5 checkpoints has weights "
            "5 times too large.",
            lambda checkpoints: _average(checkpoints, "sum"),
        ),
        Mistake(
            "halving a running average, (average + next) / 2, weights the checkpoints "
            "unequally (the last one 1/2, the one before 1/4, ...); sum them all, then divide "
            "once by their number.",
            lambda checkpoints: _average(checkpoints, "halving"),
        ),
        Mistake(
            "divide by len(checkpoints), not by 5: the paper averaged 5, but the function must "
            "average however many it is given.",
            lambda checkpoints: _average(checkpoints, "five"),
        ),
        Mistake(
            "average every entry of the state dict, biases and norms included: a name left "
            "out is missing from the result, and load_state_dict refuses it.",
            lambda checkpoints: _average(checkpoints, keys=lambda name: name.endswith("weight")),
        ),
        Mistake(
            "average all the checkpoints, not only the last one.",
            lambda checkpoints: _average(checkpoints, "last"),
        ),
    ],
)


def check_average_checkpoints(function, device=None):
    """Check ``function(checkpoints: list of state dicts) -> state dict``."""
    return run(AVERAGE_CHECKPOINTS, function, device)


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


CLIPPED_MATCHES = Exercise(
    name="clipped_matches",
    task="(matched, total) n-grams of the hypothesis, each match clipped by the references.",
    cases=_matches_cases,
    reference=_matches,
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


def check_clipped_matches(function, device=None):
    """Check ``function(hypothesis: str, references: list of str, n) -> (matched, total)``."""
    return run(CLIPPED_MATCHES, function, device)


# ---------------------------------------------------------------------------------------------

STUBS = {
    "brevity_penalty": '''def brevity_penalty(hypothesis_lengths, reference_lengths):
    """Corpus BLEU's brevity penalty. hypothesis_lengths[i]: the characters of output i;
    reference_lengths[i]: the lengths of its references -> BP, a float."""
    # Your code here (about 6 lines).
    raise NotImplementedError
''',
    "average_checkpoints": '''def average_checkpoints(checkpoints):
    """A list of state dicts (name -> tensor) -> one state dict: their element-wise
    mean, for every name."""
    # Your code here (about 4 lines).
    raise NotImplementedError
''',
    "clipped_matches": '''def clipped_matches(hypothesis, references, n):
    """Chinese strings, one character a token -> (matched, total): how many of the
    hypothesis's n-grams match, each counted at most as often as it occurs in any one
    reference, and how many n-grams the hypothesis has."""
    # Your code here (about 8 lines; collections.Counter helps).
    raise NotImplementedError
''',
}

SOLUTIONS = {
    "brevity_penalty": '''import math


def brevity_penalty(hypothesis_lengths, reference_lengths):
    """Corpus BLEU's brevity penalty. hypothesis_lengths[i]: the characters of output i;
    reference_lengths[i]: the lengths of its references -> BP, a float."""
    c = sum(hypothesis_lengths)
    # each sentence's closest reference length; on a tie, the shorter one
    r = sum(
        min(lengths, key=lambda length: (abs(length - output), length))
        for output, lengths in zip(hypothesis_lengths, reference_lengths)
    )
    return 1.0 if c >= r else math.exp(1 - r / c)
''',
    "average_checkpoints": '''def average_checkpoints(checkpoints):
    """A list of state dicts (name -> tensor) -> one state dict: their element-wise
    mean, for every name."""
    return {
        name: sum(checkpoint[name] for checkpoint in checkpoints) / len(checkpoints)
        for name in checkpoints[0]
    }
''',
    "clipped_matches": '''from collections import Counter


def clipped_matches(hypothesis, references, n):
    """Chinese strings, one character a token -> (matched, total): how many of the
    hypothesis's n-grams match, each counted at most as often as it occurs in any one
    reference, and how many n-grams the hypothesis has."""

    def ngrams(text):
        return Counter(text[i : i + n] for i in range(len(text) - n + 1))

    counts = ngrams(hypothesis)
    allowed = Counter()
    for reference in references:
        allowed |= ngrams(reference)  # | keeps the larger of the two counts
    matched = sum(min(count, allowed[gram]) for gram, count in counts.items())
    return matched, sum(counts.values())
''',
}

CHECKERS = {
    "brevity_penalty": check_brevity_penalty,
    "average_checkpoints": check_average_checkpoints,
    "clipped_matches": check_clipped_matches,
}

QUESTION = (
    'The paper says that label smoothing "hurts perplexity, as the model learns to be more '
    'unsure, but improves accuracy and BLEU score". How can one change make perplexity worse and '
    'BLEU better: what does each of them measure? And why could smoothing lower the perplexity '
    'instead, as it did in this chapter?'
)
ANSWER = (
    'Perplexity is exp of the mean cross-entropy of the reference characters under the model, '
    'teacher-forced: it rewards putting as much probability as possible on each right character, '
    'and punishes, without limit, putting very little on one. A model trained with smoothing is '
    'taught never to be more than about 90% sure, so where it is right it still pays a log-loss '
    'that a confident model would not: its perplexity can be worse. BLEU scores the decoded '
    'output, and decoding only uses the ranking of the candidates (the most probable character, '
    'or the best beam), never how confident the model is; if smoothing keeps the right character '
    'on top as often or more often (it discourages memorising the training sentences, and leaves '
    'some probability on alternatives that the beam can explore), BLEU does not suffer and may '
    'improve. So the two measure different things and can move in opposite directions. Smoothing '
    'lowers the perplexity instead when the unsmoothed model overfits: with little data (tens of '
    "thousands of sentences here, against the paper's 4.5 million pairs), a model trained to put "
    'all its probability on the reference becomes over-confident, and on new sentences its '
    "confident mistakes cost far more cross-entropy than the smoothed model's hedging. Then "
    'smoothing is mainly a regulariser, and it helps perplexity; the dev loss of the unsmoothed '
    'run rising in the later epochs while its training loss kept falling is the sign.'
)
