"""Chapter 20 exercises: IPO's loss, DPO with noisy labels, a GRPO advantage without the standard deviation,
an advantage for each token.

    from book_exercises import check
    check(ipo_loss, device=device)

Four steps the chapter does not show, on seeded summed log-probabilities and rewards: IPO's squared
loss (Azar et al., 2023), conservative DPO's loss with label smoothing (a share of the pairs assumed
flipped), the advantage of Dr. GRPO (Liu et al., 2025), which drops the group's standard deviation, and
GRPO's advantages spread over a poem's tokens with a cost at each repeated rhyme character (blame on the
character that broke the rule, by the advantage rather than by an unlikelihood term).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from book_exercises.core import Case, Mistake, exercise, randn
from transformer_book import rhyme_positions


def _logps(seed, pairs=6):
    return tuple(randn(pairs, seed=seed + k, scale=8.0) - 40.0 for k in range(4))


# ---------------------------------------------------------------------------------------------
# Exercise 1: IPO


def _ipo_cases():
    return [
        Case((*_logps(201), beta), f"6 pairs of summed log-probabilities, beta {beta:g}") for beta in (0.1, 0.5, 1.0)
    ]


def _margin(pc, pr, rc, rr):
    return (pc - rc) - (pr - rr)


@exercise(
    cases=_ipo_cases,
    success="the margin of log-ratios is pulled to 1 / (2 beta), squared and averaged, as IPO",
    mistakes=[
        Mistake(
            "IPO's target for the margin is 1 / (2 beta), not 1 / beta.",
            lambda pc, pr, rc, rr, b: ((_margin(pc, pr, rc, rr) - 1 / b) ** 2).mean(),
        ),
        Mistake(
            "the margin is not multiplied by beta in IPO: (h - 1 / (2 beta))^2 with h the plain "
            "difference of log-ratios.",
            lambda pc, pr, rc, rr, b: ((b * _margin(pc, pr, rc, rr) - 1 / (2 * b)) ** 2).mean(),
        ),
        Mistake(
            "each log-ratio is the policy's log-probability minus the reference's: "
            "(log pi(chosen) - log ref(chosen)) - (log pi(rejected) - log ref(rejected)).",
            lambda pc, pr, rc, rr, b: (((pc - pr) - (rc + rr) - 1 / (2 * b)) ** 2).mean(),
        ),
        Mistake(
            "that is DPO's loss: IPO replaces -log sigmoid(beta h) by the square (h - 1 / (2 beta))^2.",
            lambda pc, pr, rc, rr, b: -F.logsigmoid(b * _margin(pc, pr, rc, rr)).mean(),
        ),
        Mistake(
            "the target is subtracted from the margin: (h - 1 / (2 beta))^2 pulls h up to 1 / (2 beta); "
            "(h + 1 / (2 beta))^2 pulls it down to minus that, preferring the rejected poem.",
            lambda pc, pr, rc, rr, b: ((_margin(pc, pr, rc, rr) + 1 / (2 * b)) ** 2).mean(),
        ),
        Mistake(
            "the loss is the mean over the pairs, not their sum (a sum grows with the batch, and so "
            "does the step the learning rate takes).",
            lambda pc, pr, rc, rr, b: ((_margin(pc, pr, rc, rr) - 1 / (2 * b)) ** 2).sum(),
        ),
    ],
)
def ipo_loss(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta):
    """IPO's loss: the mean over pairs of (h - 1 / (2 beta))^2, h the margin of the log-ratios."""
    margin = _margin(policy_chosen, policy_rejected, reference_chosen, reference_rejected)
    return ((margin - 1 / (2 * beta)) ** 2).mean()


# ---------------------------------------------------------------------------------------------
# Exercise 2: conservative DPO


def _cdpo_cases():
    return [
        Case(
            (*_logps(211), 0.1, smoothing),
            f"6 pairs, beta 0.1, label smoothing {smoothing:g}",
        )
        for smoothing in (0.1, 0.3)
    ] + [Case((*_logps(221), 0.5, 0.0), "6 pairs, beta 0.5, no smoothing (plain DPO)")]


def _cdpo(pc, pr, rc, rr, beta, eps):
    h = beta * _margin(pc, pr, rc, rr)
    return (-(1 - eps) * F.logsigmoid(h) - eps * F.logsigmoid(-h)).mean()


@exercise(
    cases=_cdpo_cases,
    success="a share epsilon of each pair is read the other way round, as conservative DPO",
    mistakes=[
        Mistake(
            "the flipped share is the same pair with chosen and rejected exchanged: -log sigmoid(-beta h), "
            "not log sigmoid(-beta h) with a plus sign.",
            lambda pc, pr, rc, rr, b, e: (
                -(1 - e) * F.logsigmoid(b * _margin(pc, pr, rc, rr)) + e * F.logsigmoid(-b * _margin(pc, pr, rc, rr))
            ).mean(),
        ),
        Mistake(
            "the weights are 1 - epsilon for the pair as labelled and epsilon for the flipped one "
            "(you exchanged them).",
            lambda pc, pr, rc, rr, b, e: _cdpo(pc, pr, rc, rr, b, 1 - e),
        ),
        Mistake(
            "beta multiplies the margin inside the sigmoid, not the loss outside it.",
            lambda pc, pr, rc, rr, b, e: b * _cdpo(pc, pr, rc, rr, 1.0, e),
        ),
        Mistake(
            "the flipped reading is missing: scaling DPO's loss by 1 - epsilon only makes the step "
            "smaller; add epsilon times -log sigmoid(-beta h), the loss of the pair read the other way.",
            lambda pc, pr, rc, rr, b, e: (-(1 - e) * F.logsigmoid(b * _margin(pc, pr, rc, rr))).mean(),
        ),
        Mistake(
            "the loss is the mean over the pairs, not their sum.",
            lambda pc, pr, rc, rr, b, e: _cdpo(pc, pr, rc, rr, b, e) * pc.numel(),
        ),
    ],
)
def cdpo_loss(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta, smoothing):
    """DPO's loss when a share ``smoothing`` of the labels may be wrong: the mean over pairs of
    -(1 - smoothing) log sigmoid(beta h) - smoothing log sigmoid(-beta h)."""
    return _cdpo(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta, smoothing)


# ---------------------------------------------------------------------------------------------
# Exercise 3: Dr. GRPO's advantage


def _drgrpo_cases():
    binary = (torch.rand(12, generator=torch.Generator().manual_seed(231)) < 0.4).float()
    binary[:4] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    scores = randn(15, seed=232)
    return [
        Case((binary, 4), "12 rewards of 0 or 1, groups of 4"),
        Case((scores, 5), "15 real-valued rewards, groups of 5"),
    ]


@exercise(
    cases=_drgrpo_cases,
    success="each reward minus its group's mean, not divided by the group's spread",
    mistakes=[
        Mistake(
            "Dr. GRPO drops the division by the group's standard deviation: reward - group mean only.",
            lambda r, g: (
                (r.view(-1, g) - r.view(-1, g).mean(1, keepdim=True)) / (r.view(-1, g).std(1, keepdim=True) + 1e-4)
            ),
        ),
        Mistake(
            "the mean is each group's own (rows of group_size consecutive rewards), not the whole batch's.",
            lambda r, g: r - r.mean(),
        ),
        Mistake(
            "groups are consecutive: reshape to (groups, group_size), i.e. view(-1, group_size), "
            "not view(group_size, -1).",
            lambda r, g: (r.view(g, -1) - r.view(g, -1).mean(0, keepdim=True)).flatten(),
        ),
        Mistake(
            "a group's mean runs along its row: mean(dim=1) of the (groups, group_size) view; mean(dim=0) "
            "averages the i-th poem of every group, a mean across prompts.",
            lambda r, g: (r.view(-1, g) - r.view(-1, g).mean(0, keepdim=True)).flatten(),
        ),
        Mistake(
            "return one advantage per reward, in the rewards' order and shape (groups * group_size,): "
            "flatten the (groups, group_size) view.",
            lambda r, g: r.view(-1, g) - r.view(-1, g).mean(1, keepdim=True),
        ),
    ],
)
def dr_grpo_advantages(rewards, group_size):
    """Advantages of (groups * group_size,) rewards: each minus its group's mean, nothing else."""
    grouped = rewards.view(-1, group_size)
    return (grouped - grouped.mean(dim=1, keepdim=True)).flatten()


# ---------------------------------------------------------------------------------------------
# Exercise 4: an advantage for each token

PLAIN = "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。"  # no repeat
REPEAT = "白日依山尽，黄河入海流。欲穷千里目，更上一层流。"  # 流 closes verses 2 and 4
TWICE = "春山临水远，独坐望青天。白鸟飞林外，孤云落海天。江流千里去，野树万家田。明月东南起，清风满地天。"
EARLIER = "门前流水急，花落满柴门。欲问春何在，山深不见村。"  # 门 opens the poem, then closes verse 2
CUT = "床前明月光，疑是地上霜。举头望明"  # cut off in verse 3


def _token_cases():
    return [
        Case((randn(4, seed=241), [PLAIN, REPEAT, TWICE, EARLIER], 48, 1.0), "4 poems, 48 targets, cost 1"),
        Case((randn(5, seed=242), [TWICE, CUT, REPEAT, EARLIER, PLAIN], 50, 0.5), "5 poems, 50 targets, cost 0.5"),
    ]


def _spread(advantages, length):
    return advantages.unsqueeze(1).repeat(1, length)


def _marked(advantages, poems, length, cost, places):
    per_token = _spread(advantages, length)
    for row, poem in enumerate(poems):
        for index in places(poem):
            per_token[row, index] -= cost
    return per_token


def _repeats(poem):
    ends = rhyme_positions(poem)
    return [end for k, end in enumerate(ends) if poem[end] in {poem[i] for i in ends[:k]}]


def _first_uses(poem):  # for each repeat, the even verse that first closed on its character
    ends = rhyme_positions(poem)
    return [next(i for i in ends if poem[i] == poem[r]) for r in _repeats(poem)]


@exercise(
    cases=_token_cases,
    success="each poem's advantage on its every target, less the cost at each repeated rhyme character",
    mistakes=[
        Mistake(
            "only the characters that repeat an earlier even verse's rhyme character pay, not every later "
            "rhyme place: compare poem[end] with the characters that closed the even verses before.",
            lambda a, p, n, c: _marked(a, p, n, c, lambda poem: rhyme_positions(poem)[1:]),
        ),
        Mistake(
            "the blame goes to the repeat, the later of the two verses: the first use of a rhyme character "
            "is no fault.",
            lambda a, p, n, c: _marked(a, p, n, c, _first_uses),
        ),
        Mistake(
            "character i of a poem is target i (tokens[:, 0] is <s>, never a target): index the advantages "
            "by the position in the poem, not by the token's position (i + 1).",
            lambda a, p, n, c: _marked(a, p, n, c, lambda poem: [i + 1 for i in _repeats(poem)]),
        ),
        Mistake(
            "the cost lowers the advantage at the fault: subtract it.",
            lambda a, p, n, c: _marked(a, p, n, -c, _repeats),
        ),
        Mistake(
            "a repeat is of a rhyme character, not of any earlier character: compare with the characters "
            "that closed the earlier even verses (rhyme_positions), not with the whole poem before it.",
            lambda a, p, n, c: _marked(
                a, p, n, c, lambda poem: [end for end in rhyme_positions(poem) if poem[end] in poem[:end]]
            ),
        ),
        Mistake(
            "every repeat pays: a character that closes three even verses is at fault twice, in the second "
            "and in the third.",
            lambda a, p, n, c: _marked(a, p, n, c, lambda poem: _repeats(poem)[:1]),
        ),
    ],
)
def token_advantages(advantages, poems, length, cost):
    """advantages (batch,) -> (batch, length): each poem's advantage at every target, less ``cost`` at
    each character that closes an even verse on a rhyme character an earlier even verse closed on."""
    per_token = advantages.unsqueeze(1).repeat(1, length)  # (batch, length)
    for row, poem in enumerate(poems):
        ends = rhyme_positions(poem)  # character i of the poem is target i
        for k, end in enumerate(ends):
            if poem[end] in {poem[i] for i in ends[:k]}:
                per_token[row, end] -= cost
    return per_token
