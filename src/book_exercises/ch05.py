"""Chapter 5 exercises: the position-wise feed-forward network and the encoder layer.

    from book_exercises import check
    check(feed_forward, device=device)

Each check calls the reader's function on CPU tensors and modules (pass ``device=`` to move them)
and compares its output, moved to the CPU, with transformer_book's PositionwiseFeedForward and
EncoderLayer.
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise, randn
from transformer_book import EncoderLayer, PositionwiseFeedForward

# ---------------------------------------------------------------------------------------------
# Exercise 1: FFN(x) = max(0, x W1 + b1) W2 + b2


def _ffn_cases():
    def weights(d_model, d_ff, seed):
        return (
            randn(d_model, d_ff, seed=seed),
            randn(d_ff, seed=seed + 1),
            randn(d_ff, d_model, seed=seed + 2),
            randn(d_model, seed=seed + 3),
        )

    return [
        Case((randn(2, 5, 4, seed=100),) + weights(4, 16, 101), "x (2, 5, 4), d_ff=16"),
        Case((randn(3, 8, seed=105),) + weights(8, 32, 106), "x (3, 8), d_ff=32"),
        Case((randn(1, 1, 6, seed=110),) + weights(6, 6, 111), "one token, d_ff = d_model"),
    ]


@exercise(
    cases=_ffn_cases,
    atol=1e-4,
    mistakes=[
        Mistake(
            "the ReLU is missing: two linear maps in a row are one linear map, and the wide "
            "hidden layer adds nothing. FFN(x) = max(0, x W1 + b1) W2 + b2.",
            lambda x, w1, b1, w2, b2: (x @ w1 + b1) @ w2 + b2,
        ),
        Mistake(
            "the ReLU is applied to the output as well; it belongs to the hidden layer only.",
            lambda x, w1, b1, w2, b2: torch.relu(torch.relu(x @ w1 + b1) @ w2 + b2),
        ),
        Mistake(
            "b1 is added after the ReLU; it goes inside: max(0, x W1 + b1).",
            lambda x, w1, b1, w2, b2: (torch.relu(x @ w1) + b1) @ w2 + b2,
        ),
        Mistake(
            "a bias is missing: FFN(x) = max(0, x W1 + b1) W2 + b2.",
            lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2,
        ),
        Mistake(
            "a bias is missing: FFN(x) = max(0, x W1 + b1) W2 + b2.",
            lambda x, w1, b1, w2, b2: torch.relu(x @ w1) @ w2 + b2,
        ),
        Mistake(
            "the shapes do not line up: here W1 is (d_model, d_ff) and W2 is (d_ff, d_model), so "
            "compute x @ W1 (no transpose; nn.Linear stores its weight transposed, these are the "
            "paper's matrices).",
            lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T + b2,
        ),
    ],
)
def feed_forward(x, w1, b1, w2, b2):
    """FFN(x) = max(0, x W1 + b1) W2 + b2."""
    ffn = PositionwiseFeedForward(w1.size(0), w1.size(1))
    with torch.no_grad():  # nn.Linear stores W transposed: (out, in)
        ffn.expand.weight.copy_(w1.T)
        ffn.expand.bias.copy_(b1)
        ffn.contract.weight.copy_(w2.T)
        ffn.contract.bias.copy_(b2)
    return ffn(x)


# ---------------------------------------------------------------------------------------------
# Exercise 2: count an encoder layer's parameters


def _count_cases():
    return [
        Case((512, 8, 2048), "the paper's base layer: d_model=512, heads=8, d_ff=2048"),
        Case((64, 4, 256), "d_model=64, heads=4, d_ff=256"),
        Case((8, 1, 8), "d_model=8, one head, d_ff=8"),
    ]


def _count(attention_biases=True, ffn_biases=True, norms=True, times_heads=False):
    def compute(d_model, heads, d_ff):
        attention = 4 * d_model * d_model + (4 * d_model if attention_biases else 0)
        if times_heads:
            attention *= heads
        ffn = 2 * d_model * d_ff + ((d_ff + d_model) if ffn_biases else 0)
        return attention + ffn + (4 * d_model if norms else 0)

    return compute


@exercise(
    cases=_count_cases,
    normalize=lambda got: int(got) if isinstance(got, (int, float)) or hasattr(got, "item") else got,
    mistakes=[
        Mistake(
            "you are 4 * d_model short: the two layer norms (gamma and beta, d_model each) or "
            "the biases of the four attention projections (d_model each) are missing.",
            _count(norms=False),
        ),
        Mistake(
            "the number of heads does not multiply the count: the h heads share out the same "
            "d_model x d_model projection matrices (d_k = d_model / h each).",
            _count(times_heads=True),
        ),
        Mistake("you forgot the biases of the feed-forward network (d_ff + d_model).", _count(ffn_biases=False)),
        Mistake(
            "you forgot every bias and the layer norms: count weights, biases, gamma and beta.",
            _count(attention_biases=False, ffn_biases=False, norms=False),
        ),
    ],
    describe=lambda got, expected, case: (
        f"for {case.label} the layer has {expected:,} parameters; your formula gives {got!r}."
    ),
)
def encoder_layer_parameters(d_model, heads, d_ff):
    """The number of trained parameters of one encoder layer, as a formula."""
    layer = EncoderLayer(d_model, heads, d_ff, dropout=0.0)
    return sum(parameter.numel() for parameter in layer.parameters())


# ---------------------------------------------------------------------------------------------
# Exercise 3: the encoder layer from its parts


def _encoder(d_model, heads, d_ff, seed):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = EncoderLayer(d_model, heads, d_ff, dropout=0.0).eval()
        with torch.no_grad():  # non-trivial norms, so that mixing them up shows
            for sublayer in layer.sublayers:
                sublayer.norm.gamma.add_(0.2 * torch.randn(d_model))
                sublayer.norm.beta.add_(0.2 * torch.randn(d_model))
    return layer


def _encoder_case(x, mask, layer, label):
    parts = (layer.self_attn, layer.feed_forward, layer.sublayers[0].norm, layer.sublayers[1].norm)
    return Case((x, mask) + parts, label)


def _encoder_cases():
    padding = torch.ones(2, 1, 6, dtype=torch.bool)
    padding[1, :, 4:] = False
    return [
        _encoder_case(randn(2, 6, 16, seed=120), padding, _encoder(16, 4, 32, 1), "x (2, 6, 16) with a padding mask"),
        _encoder_case(randn(1, 3, 8, seed=121), None, _encoder(8, 2, 16, 2), "no mask"),
    ]


def _encoder_variant(pre=False, use_mask=True, swap_norms=False, residual=True, same_norm=None, output_only=True):
    def compute(x, mask, self_attn, feed_forward, norm1, norm2):
        first, second = (norm2, norm1) if swap_norms else (norm1, norm2)
        if same_norm is not None:
            first = second = (norm1, norm2)[same_norm]
        mask = mask if use_mask else None

        def attend(h):
            return self_attn(h, h, h, mask)[0] if output_only else self_attn(h, h, h, mask)

        for sublayer, norm in ((attend, first), (feed_forward, second)):
            if pre:
                x = x + sublayer(norm(x))
            else:
                x = norm(x + sublayer(x)) if residual else norm(sublayer(x))
        return x

    return compute


@exercise(
    cases=_encoder_cases,
    atol=1e-4,
    mistakes=[
        Mistake(
            "the padding mask is not passed to the self-attention: self_attn(x, x, x, mask).",
            _encoder_variant(use_mask=False),
        ),
        Mistake(
            "you used pre-norm, x + sublayer(norm(x)); the paper's encoder layer is post-norm: norm(x + sublayer(x)).",
            _encoder_variant(pre=True),
        ),
        Mistake(
            "the norms are swapped: norm1 follows the self-attention, norm2 the FFN.", _encoder_variant(swap_norms=True)
        ),
        Mistake(
            "each sublayer has its own norm: norm1 after the self-attention, norm2 after the FFN "
            "(you used one of them twice).",
            _encoder_variant(same_norm=0),
        ),
        Mistake(
            "each sublayer has its own norm: norm1 after the self-attention, norm2 after the FFN "
            "(you used one of them twice).",
            _encoder_variant(same_norm=1),
        ),
        Mistake("the residual connections are missing: norm(x + sublayer(x)).", _encoder_variant(residual=False)),
        Mistake(
            "MultiHeadAttention returns (output, weights): take [0] before adding it to x.",
            _encoder_variant(output_only=False),
        ),
    ],
)
def encoder_layer(x, mask, self_attn, feed_forward, norm1, norm2):
    """Self-attention then the FFN, each inside a post-norm Add & Norm."""
    layer = EncoderLayer(x.size(-1), self_attn.heads, feed_forward.d_ff, dropout=0.0).eval()
    layer.self_attn, layer.feed_forward = self_attn, feed_forward
    layer.sublayers[0].norm, layer.sublayers[1].norm = norm1, norm2
    return layer(x, mask)
