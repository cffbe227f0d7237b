"""Chapter 8 exercises: the final linear layer and softmax, label smoothing, sampling.

    from book_exercises import check
    check(generator, device=device)

Each check calls the reader's function on CPU tensors (pass ``device=`` to move them) and compares
its output, moved to the CPU, with transformer_book's OutputLayer, LabelSmoothingLoss and the
temperature/top-k rule of sample_next_token.
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise, randn
from transformer_book import LabelSmoothingLoss, OutputLayer

# ---------------------------------------------------------------------------------------------
# Exercise 1: the generator, a linear layer and a log-softmax


def _generator_cases():
    return [
        Case((randn(2, 3, 8, seed=150), randn(10, 8, seed=151), randn(10, seed=152)), "x (2, 3, 8), vocabulary 10"),
        Case(
            (randn(4, 8, seed=153), randn(6, 8, seed=154, scale=100.0), randn(6, seed=155)),
            "logits in the hundreds (exp overflows float32 beyond 88)",
        ),
    ]


def _logits(x, weight, bias):
    return x @ weight.T + bias


@exercise(
    cases=_generator_cases,
    atol=1e-4,
    mistakes=[
        Mistake(
            "you returned probabilities (softmax); the generator returns log-probabilities: "
            "torch.log_softmax(logits, dim=-1).",
            lambda x, w, b: torch.softmax(_logits(x, w, b), dim=-1),
        ),
        Mistake("you returned the raw logits: apply log_softmax over the vocabulary (dim=-1).", _logits),
        Mistake(
            "log(softmax(...)) underflows: tiny probabilities round to 0 and their log is -inf. "
            "Use torch.log_softmax, which subtracts the maximum first (the log-sum-exp trick).",
            lambda x, w, b: torch.log(torch.softmax(_logits(x, w, b), dim=-1)),
        ),
        Mistake(
            "exp of large logits overflows to inf (and inf/inf is NaN): subtract each row's "
            "maximum before exponentiating, or use torch.log_softmax.",
            lambda x, w, b: torch.log(_logits(x, w, b).exp() / _logits(x, w, b).exp().sum(-1, keepdim=True)),
        ),
        Mistake(
            "the log-softmax runs over the wrong axis: normalize over the vocabulary, dim=-1.",
            lambda x, w, b: torch.log_softmax(_logits(x, w, b), dim=0),
        ),
        Mistake(
            "weight has shape (vocab, d_model), as in nn.Linear: the logits are x @ weight.T + bias.",
            lambda x, w, b: torch.log_softmax(x @ w + b, dim=-1),
        ),
    ],
)
def generator(x, weight, bias):
    """Log-probabilities over the vocabulary: log_softmax(x W^T + b)."""
    layer = OutputLayer(weight.size(1), weight.size(0))
    with torch.no_grad():
        layer.proj.weight.copy_(weight)
        layer.proj.bias.copy_(bias)
    return layer(x)


# ---------------------------------------------------------------------------------------------
# Exercise 2: the label-smoothed target distribution


def _smoothed_variant(
    spread_over=lambda vocab: vocab - 2, pad_column=True, pad_rows=True, right_gets=lambda s, vocab: 1 - s
):
    def compute(targets, vocab, pad, smoothing):
        distribution = torch.full((targets.size(0), vocab), smoothing / spread_over(vocab))
        distribution.scatter_(1, targets.unsqueeze(1), right_gets(smoothing, vocab))
        if pad_column:
            distribution[:, pad] = 0.0
        if pad_rows:
            distribution[targets == pad] = 0.0
        return distribution

    return compute


def _smoothed_cases():
    return [
        Case((torch.tensor([3, 1, 0, 4]), 6, 0, 0.1), "targets [3, 1, 0, 4], vocabulary 6, pad 0"),
        Case((torch.tensor([2, 2, 5]), 8, 1, 0.3), "smoothing 0.3, pad_id 1"),
        Case((torch.tensor([4]), 5, 0, 0.0), "smoothing 0 (one-hot)"),
    ]


@exercise(
    cases=_smoothed_cases,
    mistakes=[
        Mistake(
            "spread the smoothing over vocab - 2 tokens, every token except the right one and "
            "padding (you divided by vocab - 1), so that each row sums to 1.",
            _smoothed_variant(spread_over=lambda vocab: vocab - 1),
        ),
        Mistake(
            "spread the smoothing over vocab - 2 tokens, every token except the right one and "
            "padding (you divided by vocab).",
            _smoothed_variant(spread_over=lambda vocab: vocab),
        ),
        Mistake(
            "the padding column must be 0: the model is never trained to predict padding.",
            _smoothed_variant(pad_column=False),
        ),
        Mistake(
            "rows whose target is padding must be all zero: padding positions are not scored.",
            _smoothed_variant(pad_rows=False),
        ),
        Mistake(
            "the right token gets 1 - smoothing, the others share smoothing / (vocab - 2); you gave it 1.",
            _smoothed_variant(right_gets=lambda s, vocab: 1.0),
        ),
    ],
)
def smoothed_targets(targets, vocab_size, pad_id, smoothing):
    """(N,) token ids -> (N, vocab) target distributions, as the book's LabelSmoothingLoss."""
    return LabelSmoothingLoss(vocab_size, pad_id, smoothing).smoothed_targets(targets)


# ---------------------------------------------------------------------------------------------
# Exercise 3: temperature and top-k


def _top_k_cases():
    return [
        Case((randn(2, 8, seed=160, scale=2.0), 3, 1.0), "k=3, temperature 1"),
        Case((randn(1, 6, seed=161, scale=2.0), 2, 0.5), "k=2, temperature 0.5"),
        Case((randn(3, 5, seed=162, scale=2.0), 5, 2.0), "k = vocabulary, temperature 2"),
        Case((randn(1, 7, seed=163, scale=2.0), 1, 1.0), "k=1 (greedy)"),
    ]


def _not_renormalized(logits, k, temperature):
    probabilities = torch.softmax(logits / temperature, dim=-1)
    kth_best = probabilities.topk(k, dim=-1).values[..., -1:]
    return probabilities.masked_fill(probabilities < kth_best, 0.0)


@exercise(
    cases=_top_k_cases,
    mistakes=[
        Mistake(
            "you multiplied the logits by the temperature; divide by it (a low temperature sharpens the distribution).",
            lambda logits, k, t: top_k_probabilities(logits * t * t, k, t),
        ),
        Mistake(
            "the kept probabilities are not renormalized: take the softmax after setting the "
            "other logits to -inf, so the k kept tokens share all the probability.",
            _not_renormalized,
        ),
        Mistake(
            "the removed logits were set to 0, not -inf: a logit of 0 still gets probability "
            "e^0 / sum. Use masked_fill(..., float('-inf')).",
            lambda logits, k, t: torch.softmax(
                (logits / t).masked_fill(logits / t < (logits / t).topk(k, -1).values[..., -1:], 0.0), dim=-1
            ),
        ),
        Mistake(
            "you kept one token too few: keep every logit >= the k-th largest (topk(k).values[..., -1:]).",
            lambda logits, k, t: top_k_probabilities(logits, k - 1, t) if k > 1 else None,
        ),
        Mistake(
            "the temperature is ignored: divide the logits by it before the softmax.",
            lambda logits, k, t: top_k_probabilities(logits, k, 1.0),
        ),
    ],
)
def top_k_probabilities(logits, k, temperature):
    """Softmax(logits / temperature) restricted to the k highest logits.

    The distribution sample_next_token draws from (ties with the k-th logit are kept)."""
    scaled = logits / temperature  # (..., vocab)
    kth_best = scaled.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return torch.softmax(scaled.masked_fill(scaled < kth_best, float("-inf")), dim=-1)
