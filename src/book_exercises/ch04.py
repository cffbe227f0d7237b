"""Chapter 4 exercises: residual connections and layer normalization.

    from book_exercises import check
    check(layer_norm, device=device)

Each check calls the reader's function on CPU tensors and modules (pass ``device=`` to move them)
and compares its output, moved to the CPU, with transformer_book.LayerNorm / SublayerConnection.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from book_exercises.core import Case, Mistake, exercise, randn
from transformer_book import LayerNorm, SublayerConnection

# ---------------------------------------------------------------------------------------------
# Exercise 1: layer norm from the mean and the variance


def _ln_variant(unbiased=False, eps_outside=False, dim=-1, affine=True, eps_default=1e-5):
    def compute(x, gamma, beta, eps=eps_default):
        mean = x.mean(dim=dim, keepdim=True)
        if eps_outside:
            normalized = (x - mean) / (x.std(dim=dim, keepdim=True, unbiased=unbiased) + eps)
        else:
            variance = x.var(dim=dim, keepdim=True, unbiased=unbiased)
            normalized = (x - mean) / torch.sqrt(variance + eps)
        return gamma * normalized + beta if affine else normalized

    return compute


def _ln_cases():
    return [
        Case(
            (randn(2, 3, 8, seed=50, scale=3.0) + 1.0, randn(8, seed=51), randn(8, seed=52)),
            "x (2, 3, 8), random gamma and beta",
        ),
        Case((randn(4, 16, seed=53), randn(16, seed=54), randn(16, seed=55)), "x (4, 16)"),
        Case(
            (randn(3, 8, seed=56) * 1e-3 + 0.5, torch.ones(8), torch.zeros(8)),
            "nearly constant tokens (std 1e-3), where eps matters",
        ),
        Case((randn(5, 6, seed=57), randn(6, seed=58), randn(6, seed=59), 0.1), "eps=0.1"),
    ]


@exercise(
    cases=_ln_cases,
    atol=1e-4,
    mistakes=[
        Mistake(
            "your LayerNorm uses the unbiased variance (divides by n-1); layer norm divides by n: "
            "x.var(dim=-1, unbiased=False, keepdim=True).",
            _ln_variant(unbiased=True),
        ),
        Mistake(
            "you added eps to the unbiased standard deviation, outside the square root (The "
            "Annotated Transformer's variant, copied by the source notes): use "
            "(x - mean) / sqrt(var + eps) with the biased variance.",
            _ln_variant(unbiased=True, eps_outside=True),
        ),
        Mistake(
            "eps is added outside the square root: use (x - mean) / sqrt(var + eps), not (x - mean) / (std + eps).",
            _ln_variant(eps_outside=True),
        ),
        Mistake(
            "you normalized each feature over the batch (dim=0): those are batch statistics, "
            "batch norm. Layer norm normalizes each token over its own features (dim=-1).",
            _ln_variant(dim=0),
        ),
        Mistake("gamma and beta are not applied: return gamma * normalized + beta.", _ln_variant(affine=False)),
        Mistake("eps is ignored: use the eps argument, sqrt(var + eps).", _ln_variant(eps_default=0.0)),
        Mistake(
            "eps is not the one passed in (the check passes eps=0.1): use the eps argument.",
            lambda x, g, b, eps=1e-5: _ln_variant()(x, g, b, 1e-5),
        ),
    ],
)
def layer_norm(x, gamma, beta, eps=1e-5):
    """Normalize each token over its features, then scale by gamma and shift by beta."""
    norm = LayerNorm(x.size(-1), eps)
    with torch.no_grad():
        norm.gamma.copy_(gamma)
        norm.beta.copy_(beta)
    return norm(x)


# ---------------------------------------------------------------------------------------------
# Exercise 2: the post-norm sublayer connection


def _norm(d_model, seed):
    norm = LayerNorm(d_model)
    with torch.no_grad():
        norm.gamma.copy_(1 + 0.1 * randn(d_model, seed=seed))
        norm.beta.copy_(0.1 * randn(d_model, seed=seed + 1))
    return norm


def _sublayer(d_model, seed):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh())


def _sublayer_cases():
    return [
        Case((randn(2, 4, 8, seed=60, scale=2.0), _sublayer(8, 1), _norm(8, 61)), "x (2, 4, 8)"),
        Case((randn(1, 1, 16, seed=62), _sublayer(16, 2), _norm(16, 63)), "a single token"),
    ]


@exercise(
    cases=_sublayer_cases,
    atol=1e-4,
    mistakes=[
        Mistake(
            "you normalized the sublayer's input (pre-norm: x + sublayer(norm(x))); the paper's "
            "Add & Norm is post-norm: norm(x + sublayer(x)).",
            lambda x, s, n: x + s(n(x)),
        ),
        Mistake(
            "the residual is missing: add the input before normalizing, norm(x + sublayer(x)).", lambda x, s, n: n(s(x))
        ),
        Mistake(
            "you added x after the norm (x + norm(sublayer(x))); the sum goes inside: norm(x + sublayer(x)).",
            lambda x, s, n: x + n(s(x)),
        ),
        Mistake("the norm is missing: return norm(x + sublayer(x)).", lambda x, s, n: x + s(x)),
    ],
)
def sublayer_connection(x, sublayer, norm):
    """LayerNorm(x + sublayer(x)), the paper's post-norm Add & Norm."""
    connection = SublayerConnection(x.size(-1), dropout=0.0, norm_first=False)
    connection.norm = copy.deepcopy(norm)
    return connection(x, sublayer)


# ---------------------------------------------------------------------------------------------
# Exercise 3: a pre-norm stack, and its final norm


def _stack_cases():
    d_model = 8
    return [
        Case(
            (
                randn(2, 3, d_model, seed=64),
                [_sublayer(d_model, i) for i in range(4)],
                [_norm(d_model, 70 + 2 * i) for i in range(4)],
                _norm(d_model, 80),
            ),
            "4 pre-norm sublayers",
        ),
        Case(
            (randn(1, 5, d_model, seed=65), [_sublayer(d_model, 9)], [_norm(d_model, 90)], _norm(d_model, 92)),
            "one sublayer",
        ),
    ]


def _stack_variant(final=True, pre=True, reuse_first=False):
    def compute(x, sublayers, norms, final_norm):
        for index, sublayer in enumerate(sublayers):
            norm = norms[0] if reuse_first else norms[index]
            x = x + sublayer(norm(x)) if pre else norm(x + sublayer(x))
        return final_norm(x) if final else x

    return compute


@exercise(
    cases=_stack_cases,
    atol=1e-4,
    mistakes=[
        Mistake(
            "the final norm is missing: a pre-norm stack's output is the raw residual stream, "
            "whose scale grows with depth (the source notes' commented-out `return self.norm(x)`).",
            _stack_variant(final=False),
        ),
        Mistake(
            "you used post-norm sublayers, norm(x + sublayer(x)); this stack is pre-norm: x + sublayer(norm(x)).",
            _stack_variant(pre=False),
        ),
        Mistake(
            "you used post-norm sublayers, norm(x + sublayer(x)); this stack is pre-norm: x + sublayer(norm(x)).",
            _stack_variant(pre=False, final=False),
        ),
        Mistake("every sublayer has its own norm: use norms[i] with sublayers[i].", _stack_variant(reuse_first=True)),
    ],
)
def pre_norm_stack(x, sublayers, norms, final_norm):
    """x + sublayer(norm(x)) for each sublayer in turn, then the final norm."""
    for sublayer, norm in zip(sublayers, norms):
        connection = SublayerConnection(x.size(-1), dropout=0.0, norm_first=True)
        connection.norm = copy.deepcopy(norm)
        x = connection(x, sublayer)
    return final_norm(x)
