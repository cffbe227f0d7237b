"""Chapter 9 exercises: the warm-up schedule, the parameter count, exact match by teacher forcing.

    from book_exercises import check
    check(warmup_rate, device=device)

Each check calls the reader's function on small inputs and compares it with transformer_book
(warmup_rate, make_model on the meta device, and the rule of training.exact_match_accuracy).
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise, seeded
from transformer_book import make_model
from transformer_book import warmup_rate as package_warmup_rate

# ---------------------------------------------------------------------------------------------
# Exercise 1: the warm-up learning rate


def _warmup_cases():
    return [
        Case(
            ([1, 10, 100, 200, 400, 2000], 64, 200),
            "d_model 64, warm-up 200, steps 1..2000",
        ),
        Case(([1, 1000, 4000, 8000, 100_000], 512, 4000), "the paper's base model"),
    ]


def _rates_of(function):
    """The rates of a list of steps, from a function of one step (None if it returns None)."""

    def rates(steps, d_model, warmup_steps):
        values = [function(step, d_model, warmup_steps) for step in steps]
        if any(value is None for value in values):
            return None
        return torch.tensor([float(value) for value in values], dtype=torch.float64)

    return rates


exercise(
    task="d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).",
    cases=_warmup_cases,
    adapt=_rates_of,
    rtol=1e-6,
    atol=0.0,
    mistakes=[
        Mistake(
            "your rate lacks the factor d_model^-0.5 (wider models take smaller steps).",
            lambda s, d, w: min(s**-0.5, s * w**-1.5),
        ),
        Mistake(
            "you took the max of the two terms: the rate is their min (a linear rise up to "
            "step warmup_steps, then 1/sqrt(step)).",
            lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5),
        ),
        Mistake(
            "the warm-up term is step * warmup_steps^-1.5 (so the two terms meet at step = "
            "warmup_steps); you used another power of warmup_steps.",
            lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),
        ),
    ],
    normalize=lambda got: got.double() if isinstance(got, torch.Tensor) else got,
)(package_warmup_rate)


# ---------------------------------------------------------------------------------------------
# Exercise 2: the parameter count of the Transformer (tied embeddings)


def _formula(d_model, d_ff, layers, vocab, biases=True, norms=True, tied=True):
    bias = 1 if biases else 0
    linear = d_model * d_model + bias * d_model
    feed_forward = 2 * d_model * d_ff + bias * (d_ff + d_model)
    norm = 2 * d_model if norms else 0
    encoder_layer = 4 * linear + feed_forward + 2 * norm
    decoder_layer = 8 * linear + feed_forward + 3 * norm
    embeddings = vocab * d_model * (1 if tied else 3)
    return torch.tensor(layers * (encoder_layer + decoder_layer) + embeddings + bias * vocab)


def _count_cases():
    return [
        Case((512, 2048, 6, 37000), "the base model (d_model 512, d_ff 2048, 6 layers)"),
        Case((64, 256, 2, 20), "the dates model (d_model 64, d_ff 256, 2 layers)"),
        Case((16, 32, 1, 5), "a tiny model"),
    ]


@exercise(
    cases=_count_cases,
    normalize=lambda got: torch.tensor(int(got)) if not isinstance(got, torch.Tensor) else got,
    mistakes=[
        Mistake(
            "you left out the biases (every nn.Linear has one, of its output size).",
            lambda *args: _formula(*args, biases=False),
        ),
        Mistake(
            "you left out the layer norms: 2 per encoder layer, 3 per decoder layer, each with "
            "a gain and a bias of size d_model.",
            lambda *args: _formula(*args, norms=False),
        ),
        Mistake(
            "with tie_weights=True the source embedding, target embedding and output "
            "projection share one vocab x d_model matrix: count it once.",
            lambda *args: _formula(*args, tied=False),
        ),
    ],
)
def parameter_count(d_model, d_ff, layers, vocab):
    """The number of parameters of make_model(..., tie_weights=True)."""
    with torch.device("meta"):
        model = make_model(
            vocab,
            vocab,
            num_layers=layers,
            d_model=d_model,
            d_ff=d_ff,
            heads=2,
            tie_weights=True,
        )
    return torch.tensor(sum(parameter.numel() for parameter in model.parameters()))


# ---------------------------------------------------------------------------------------------
# Exercise 3: exact match under teacher forcing


def _teacher_cases():
    generator = seeded(91)
    log_probs = torch.randn(6, 5, 7, generator=generator).log_softmax(-1)  # (6, 5, 7)
    labels = log_probs.argmax(-1)  # all right, then spoil some rows
    labels[1, 2] = (labels[1, 2] + 1) % 7  # a wrong middle token
    labels[2, 3:] = 0  # padding after the end: ignored
    labels[3, 4] = (labels[3, 4] + 1) % 7  # a wrong last token (the end token)
    labels[4, 3:] = 0
    labels[4, 0] = (labels[4, 0] + 1) % 7
    return [Case((log_probs, labels, 0), "6 sequences of 5 tokens, vocabulary 7, pad id 0")]


@exercise(
    cases=_teacher_cases,
    mistakes=[
        Mistake(
            "padding positions must not count: a sequence is right when every label that is not padding is the argmax.",
            lambda lp, labels, pad: (lp.argmax(-1) == labels).all(dim=1),
        ),
        Mistake(
            "the last position (the end token) counts too: a model that never stops is wrong.",
            lambda lp, labels, pad: teacher_forced_exact_match(lp[:, :-1], labels[:, :-1], pad),
        ),
        Mistake(
            "return one boolean per sequence (all positions right), not per-token correctness.",
            lambda lp, labels, pad: (lp.argmax(-1) == labels) | (labels == pad),
        ),
    ],
)
def teacher_forced_exact_match(log_probs, labels, pad_id):
    """(batch,) True where every non-padding label is the argmax."""
    right = (log_probs.argmax(dim=-1) == labels) | (labels == pad_id)  # (batch, t)
    return right.all(dim=1)  # (batch,)
