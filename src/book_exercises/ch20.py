"""Chapter 20 exercises: IPO's loss, DPO with noisy labels, a GRPO advantage without the standard deviation,
RLOO's leave-one-out advantage.

    from book_exercises import check
    check(ipo_loss, device=device)

Four steps the chapter does not show, on seeded summed log-probabilities and rewards: IPO's squared
loss (Azar et al., 2023), conservative DPO's loss with label smoothing (a share of the pairs assumed
flipped), the advantage of Dr. GRPO (Liu et al., 2025), which drops the group's standard deviation, and
RLOO's (Ahmadian et al., 2024), whose baseline for each response is the mean of its group's others.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from book_exercises.core import Case, Mistake, exercise, randn


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
# Exercise 4: RLOO's leave-one-out advantage


@exercise(
    cases=_drgrpo_cases,
    success="each reward minus the mean of the other rewards of its group, as RLOO",
    mistakes=[
        Mistake(
            "the baseline leaves the poem out: the mean of the group's other group_size - 1 rewards, not of "
            "all group_size (that is Dr. GRPO's advantage, smaller by (group_size - 1) / group_size).",
            lambda r, g: (r.view(-1, g) - r.view(-1, g).mean(1, keepdim=True)).flatten(),
        ),
        Mistake(
            "the others are group_size - 1 rewards: divide their sum by group_size - 1, not by group_size.",
            lambda r, g: (r.view(-1, g) - (r.view(-1, g).sum(1, keepdim=True) - r.view(-1, g)) / g).flatten(),
        ),
        Mistake(
            "RLOO does not divide by the group's standard deviation: reward minus the others' mean only.",
            lambda r, g: (
                (r.view(-1, g) - (r.view(-1, g).sum(1, keepdim=True) - r.view(-1, g)) / (g - 1))
                / (r.view(-1, g).std(1, keepdim=True) + 1e-4)
            ).flatten(),
        ),
        Mistake(
            "groups are consecutive: reshape to (groups, group_size), i.e. view(-1, group_size), "
            "not view(group_size, -1).",
            lambda r, g: (r.view(g, -1) - (r.view(g, -1).sum(0, keepdim=True) - r.view(g, -1)) / (g - 1)).flatten(),
        ),
        Mistake(
            "return one advantage per reward, in the rewards' order and shape (groups * group_size,): "
            "flatten the (groups, group_size) view.",
            lambda r, g: r.view(-1, g) - (r.view(-1, g).sum(1, keepdim=True) - r.view(-1, g)) / (g - 1),
        ),
    ],
)
def rloo_advantages(rewards, group_size):
    """Advantages of (groups * group_size,) rewards: each minus the mean of its group's other rewards."""
    grouped = rewards.view(-1, group_size)  # (groups, group_size)
    others = (grouped.sum(dim=1, keepdim=True) - grouped) / (group_size - 1)
    return (grouped - others).flatten()
