"""Chapter 19 exercises: rsLoRA's scale, the prompt's labels masked, a merged LoRA weight unmerged.

    from book_exercises import check
    check(rslora_forward, device=device)

Three steps the chapter does not show: the forward pass of a LoRA layer with rank-stabilised scaling
(rsLoRA, peft's ``use_rslora=True``), the labels of a batch of instruction pairs with the prompt masked
out, and the base weight recovered from a merged one (peft's ``unmerge``), on seeded inputs.
"""

from __future__ import annotations

import math

import torch

from book_exercises.core import Case, Mistake, exercise, randn

# ---------------------------------------------------------------------------------------------
# Exercise 1: rsLoRA's scale


def _rslora_cases():
    cases = []
    for seed, (rank, alpha) in enumerate([(4, 8.0), (16, 16.0), (9, 3.0)], start=191):
        x = randn(2, 3, 12, seed=seed)
        weight = randn(10, 12, seed=seed + 10, scale=0.3)
        lora_a = randn(rank, 12, seed=seed + 20, scale=0.3)
        lora_b = randn(10, rank, seed=seed + 30, scale=0.3)
        cases.append(Case((x, weight, lora_a, lora_b, alpha), f"(2, 3, 12) inputs, rank {rank}, alpha {alpha:g}"))
    return cases


def _lora(x, weight, a, b, scale):
    return x @ weight.T + scale * (x @ a.T @ b.T)


@exercise(
    cases=_rslora_cases,
    success="the update is scaled by alpha / sqrt(rank), as peft's use_rslora=True",
    mistakes=[
        Mistake(
            "that is LoRA's own scale, alpha / rank: rsLoRA divides by the square root of the rank, "
            "alpha / sqrt(rank), so that the update keeps its size as the rank grows.",
            lambda x, w, a, b, alpha: _lora(x, w, a, b, alpha / a.shape[0]),
        ),
        Mistake(
            "the root is of the rank alone: alpha / sqrt(rank), not sqrt(alpha / rank).",
            lambda x, w, a, b, alpha: _lora(x, w, a, b, math.sqrt(alpha / a.shape[0])),
        ),
        Mistake(
            "the frozen layer still runs: y = x W^T + scale * x A^T B^T (you returned the update alone).",
            lambda x, w, a, b, alpha: _lora(x, w, a, b, alpha / math.sqrt(a.shape[0])) - x @ w.T,
        ),
        Mistake(
            "the rank is lora_A's first dimension (A has shape rank x in), not its second.",
            lambda x, w, a, b, alpha: _lora(x, w, a, b, alpha / math.sqrt(a.shape[1])),
        ),
    ],
)
def rslora_forward(x, weight, lora_A, lora_B, alpha):
    """A LoRA layer's output with rsLoRA's scale: x W^T + (alpha / sqrt(rank)) x A^T B^T (no bias)."""
    return _lora(x, weight, lora_A, lora_B, alpha / math.sqrt(lora_A.shape[0]))


# ---------------------------------------------------------------------------------------------
# Exercise 2: the prompt masked out of the labels


def _mask_cases():
    tokens = torch.randint(3, 50, (3, 12), generator=torch.Generator().manual_seed(192))
    tokens[:, 0] = 1  # <s>
    tokens[2, 9:] = 0  # padding
    return [
        Case((tokens, [4, 7, 2], 0), "3 sequences of 12 ids, prompts of 4, 7 and 2 characters, pad id 0"),
        Case((tokens[:2], [1, 10], 0), "2 sequences, prompts of 1 and 10 characters"),
    ]


def _masked(tokens, lengths, pad, start, extra):
    labels = tokens.clone()
    for row, length in enumerate(lengths):
        labels[row, start : 1 + length + extra] = pad
    return labels


@exercise(
    cases=_mask_cases,
    success="every prompt token is left out of the loss, and every poem token kept",
    mistakes=[
        Mistake(
            "one too many: the prompt's characters are at positions 1 to n (after <s>); position n + 1 "
            "is the poem's first character, which the model must learn to write.",
            lambda t, n, p: _masked(t, n, p, 1, 1),
        ),
        Mistake(
            "one too few: <s> sits at position 0, so the n prompt characters are at positions 1 to n; "
            "mask labels[row, 1 : 1 + n].",
            lambda t, n, p: _masked(t, n, p, 1, -1),
        ),
        Mistake(
            "each row has its own prompt length: mask row by row, not every row with the first length.",
            lambda t, n, p: _masked(t, [n[0]] * len(n), p, 1, 0),
        ),
    ],
)
def mask_prompt(tokens, prompt_lengths, pad_id):
    """Labels for (batch, seq) ids <s> prompt poem <s>: a copy with each row's prompt ids set to pad_id."""
    return _masked(tokens, prompt_lengths, pad_id, 1, 0)


# ---------------------------------------------------------------------------------------------
# Exercise 3: unmerge


def _unmerge_cases():
    cases = []
    for seed, (rank, alpha) in enumerate([(2, 4.0), (8, 8.0), (4, 1.0)], start=193):
        weight = randn(6, 10, seed=seed, scale=0.5)
        a, b = randn(rank, 10, seed=seed + 10, scale=0.5), randn(6, rank, seed=seed + 20, scale=0.5)
        merged = weight + (alpha / rank) * b @ a
        cases.append(Case((merged, a, b, alpha), f"a (6, 10) merged weight, rank {rank}, alpha {alpha:g}"))
    return cases


@exercise(
    cases=_unmerge_cases,
    success="the frozen weight comes back: merged - (alpha / rank) B A",
    mistakes=[
        Mistake(
            "the merged update was scaled: subtract (alpha / rank) B A, not B A.",
            lambda m, a, b, alpha: m - b @ a,
        ),
        Mistake(
            "unmerging subtracts what merging added: W = merged - scale * B A (you added it again).",
            lambda m, a, b, alpha: m + (alpha / a.shape[0]) * b @ a,
        ),
        Mistake(
            "B A has the weight's shape (out, in); A^T B^T is its transpose, (in, out).",
            lambda m, a, b, alpha: m - (alpha / a.shape[0]) * a.T @ b.T,
        ),
    ],
)
def unmerge(merged, lora_A, lora_B, alpha):
    """The frozen weight W, from the merged weight W + (alpha / rank) B A and the adapter."""
    return merged - (alpha / lora_A.shape[0]) * lora_B @ lora_A
