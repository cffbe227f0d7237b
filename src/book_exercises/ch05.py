"""Chapter 5 exercises: the position-wise feed-forward network and the encoder layer.

    from book_exercises.ch05 import check_feed_forward
    check_feed_forward(feed_forward)

Every checker calls the reader's function on CPU tensors and modules (pass ``device=`` to move them)
and compares its output, moved to the CPU, with transformer_book's PositionwiseFeedForward and
EncoderLayer.
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Exercise, Mistake, randn, run
from transformer_book import EncoderLayer, PositionwiseFeedForward

# ---------------------------------------------------------------------------------------------
# Exercise 1: FFN(x) = max(0, x W1 + b1) W2 + b2


def _reference_ffn(x, w1, b1, w2, b2):
    ffn = PositionwiseFeedForward(w1.size(0), w1.size(1))
    with torch.no_grad():  # nn.Linear stores W transposed: (out, in)
        ffn.expand.weight.copy_(w1.T)
        ffn.expand.bias.copy_(b1)
        ffn.contract.weight.copy_(w2.T)
        ffn.contract.bias.copy_(b2)
    return ffn(x)


def _ffn_cases():
    def weights(d_model, d_ff, seed):
        return (randn(d_model, d_ff, seed=seed), randn(d_ff, seed=seed + 1),
                randn(d_ff, d_model, seed=seed + 2), randn(d_model, seed=seed + 3))
    return [Case((randn(2, 5, 4, seed=100),) + weights(4, 16, 101), "x (2, 5, 4), d_ff=16"),
            Case((randn(3, 8, seed=105),) + weights(8, 32, 106), "x (3, 8), d_ff=32"),
            Case((randn(1, 1, 6, seed=110),) + weights(6, 6, 111), "one token, d_ff = d_model")]


FEED_FORWARD = Exercise(
    name="feed_forward",
    task="FFN(x) = max(0, x W1 + b1) W2 + b2.",
    cases=_ffn_cases,
    reference=_reference_ffn,
    atol=1e-4,
    mistakes=[
        Mistake("the ReLU is missing: two linear maps in a row are one linear map, and the wide "
                "hidden layer adds nothing. FFN(x) = max(0, x W1 + b1) W2 + b2.",
                lambda x, w1, b1, w2, b2: (x @ w1 + b1) @ w2 + b2),
        Mistake("the ReLU is applied to the output as well; it belongs to the hidden layer only.",
                lambda x, w1, b1, w2, b2: torch.relu(torch.relu(x @ w1 + b1) @ w2 + b2)),
        Mistake("b1 is added after the ReLU; it goes inside: max(0, x W1 + b1).",
                lambda x, w1, b1, w2, b2: (torch.relu(x @ w1) + b1) @ w2 + b2),
        Mistake("a bias is missing: FFN(x) = max(0, x W1 + b1) W2 + b2.",
                lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2),
        Mistake("a bias is missing: FFN(x) = max(0, x W1 + b1) W2 + b2.",
                lambda x, w1, b1, w2, b2: torch.relu(x @ w1) @ w2 + b2),
    ],
    error_hints=[("cannot be multiplied", ("the shapes do not line up: here W1 is (d_model, d_ff) "
                  "and W2 is (d_ff, d_model), so compute x @ W1 (no transpose; nn.Linear stores "
                  "its weight transposed, these are the paper's matrices)."))],
)


def check_feed_forward(function, device=None):
    """Check a position-wise feed-forward network function.

    Check ``function(x, w1, b1, w2, b2) -> (..., d_model)``: w1 (d_model, d_ff), b1 (d_ff,),
    w2 (d_ff, d_model), b2 (d_model,), the paper's layout (x @ w1). Inputs on the CPU unless
    ``device`` is given; the output is moved to the CPU and compared to 1e-4."""
    return run(FEED_FORWARD, function, device)


# ---------------------------------------------------------------------------------------------
# Exercise 2: count an encoder layer's parameters


def _reference_count(d_model, heads, d_ff):
    layer = EncoderLayer(d_model, heads, d_ff, dropout=0.0)
    return sum(parameter.numel() for parameter in layer.parameters())


def _count_cases():
    return [Case((512, 8, 2048), "the paper's base layer: d_model=512, heads=8, d_ff=2048"),
            Case((64, 4, 256), "d_model=64, heads=4, d_ff=256"),
            Case((8, 1, 8), "d_model=8, one head, d_ff=8")]


def _count(attention_biases=True, ffn_biases=True, norms=True, times_heads=False):
    def compute(d_model, heads, d_ff):
        attention = 4 * d_model * d_model + (4 * d_model if attention_biases else 0)
        if times_heads:
            attention *= heads
        ffn = 2 * d_model * d_ff + ((d_ff + d_model) if ffn_biases else 0)
        return attention + ffn + (4 * d_model if norms else 0)
    return compute


ENCODER_PARAMETERS = Exercise(
    name="encoder_layer_parameters",
    task="the number of trained parameters of one encoder layer, as a formula.",
    cases=_count_cases,
    reference=_reference_count,
    normalize=lambda got: int(got) if isinstance(got, (int, float)) or hasattr(got, "item") else got,
    mistakes=[
        Mistake("you forgot the two layer norms: each has gamma and beta, 2 * d_model parameters.",
                _count(norms=False)),
        Mistake("the number of heads does not multiply the count: the h heads share out the same "
                "d_model x d_model projection matrices (d_k = d_model / h each).",
                _count(times_heads=True)),
        Mistake("you forgot the biases of the four attention projections (4 * d_model).",
                _count(attention_biases=False)),
        Mistake("you forgot the biases of the feed-forward network (d_ff + d_model).",
                _count(ffn_biases=False)),
        Mistake("you forgot every bias and the layer norms: count weights, biases, gamma and beta.",
                _count(attention_biases=False, ffn_biases=False, norms=False)),
    ],
    describe=lambda got, expected, case: (f"for {case.label} the layer has {expected:,} parameters; "
                                          f"your formula gives {got!r}."),
)


def check_encoder_layer_parameters(function, device=None):
    """Check a function that counts an encoder layer's parameters.

    Check ``function(d_model, heads, d_ff) -> int`` against the parameter count of
    transformer_book.EncoderLayer. No tensors are involved, so ``device`` is not used."""
    return run(ENCODER_PARAMETERS, function, device)


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
    return [_encoder_case(randn(2, 6, 16, seed=120), padding, _encoder(16, 4, 32, 1),
                          "x (2, 6, 16) with a padding mask"),
            _encoder_case(randn(1, 3, 8, seed=121), None, _encoder(8, 2, 16, 2), "no mask")]


def _reference_encoder(x, mask, self_attn, feed_forward, norm1, norm2):
    layer = EncoderLayer(x.size(-1), self_attn.heads, feed_forward.d_ff, dropout=0.0).eval()
    layer.self_attn, layer.feed_forward = self_attn, feed_forward
    layer.sublayers[0].norm, layer.sublayers[1].norm = norm1, norm2
    return layer(x, mask)


def _encoder_variant(pre=False, use_mask=True, swap_norms=False, residual=True, same_norm=None):
    def compute(x, mask, self_attn, feed_forward, norm1, norm2):
        first, second = (norm2, norm1) if swap_norms else (norm1, norm2)
        if same_norm is not None:
            first = second = (norm1, norm2)[same_norm]
        mask = mask if use_mask else None

        def attend(h):
            return self_attn(h, h, h, mask)[0]

        for sublayer, norm in ((attend, first), (feed_forward, second)):
            if pre:
                x = x + sublayer(norm(x))
            else:
                x = norm(x + sublayer(x)) if residual else norm(sublayer(x))
        return x
    return compute


ENCODER_LAYER = Exercise(
    name="encoder_layer",
    task="self-attention then the FFN, each inside a post-norm Add & Norm.",
    cases=_encoder_cases,
    reference=_reference_encoder,
    atol=1e-4,
    mistakes=[
        Mistake("the padding mask is not passed to the self-attention: self_attn(x, x, x, mask).",
                _encoder_variant(use_mask=False)),
        Mistake("you used pre-norm, x + sublayer(norm(x)); the paper's encoder layer is post-norm: "
                "norm(x + sublayer(x)).",
                _encoder_variant(pre=True)),
        Mistake("the norms are swapped: norm1 follows the self-attention, norm2 the FFN.",
                _encoder_variant(swap_norms=True)),
        Mistake("each sublayer has its own norm: norm1 after the self-attention, norm2 after the FFN "
                "(you used one of them twice).",
                _encoder_variant(same_norm=0)),
        Mistake("each sublayer has its own norm: norm1 after the self-attention, norm2 after the FFN "
                "(you used one of them twice).",
                _encoder_variant(same_norm=1)),
        Mistake("the residual connections are missing: norm(x + sublayer(x)).",
                _encoder_variant(residual=False)),
    ],
    error_hints=[("tuple", ("MultiHeadAttention returns (output, weights): take [0] before adding "
                  "it to x."))],
)


def check_encoder_layer(function, device=None):
    """Check an encoder layer forward pass written with the layer's modules.

    Check ``function(x, mask, self_attn, feed_forward, norm1, norm2) -> (batch, seq, d_model)``:
    self_attn is a transformer_book.MultiHeadAttention (it returns (output, weights)), feed_forward
    a PositionwiseFeedForward, norm1 and norm2 LayerNorms; mask is None or (batch, 1, seq).
    Inputs and modules on the CPU unless ``device`` is given; the output is moved to the CPU."""
    return run(ENCODER_LAYER, function, device)


# ---------------------------------------------------------------------------------------------

STUBS = {
    "feed_forward": '''def feed_forward(x, w1, b1, w2, b2):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 for x (..., d_model)."""
    # Your code here (1 or 2 lines).
    raise NotImplementedError
''',
    "encoder_layer_parameters": '''def encoder_layer_parameters(d_model, heads, d_ff):
    """Trained parameters (weights, biases, gamma, beta) of one encoder layer."""
    # Your code here: attention projections, feed-forward network, two layer norms.
    raise NotImplementedError
''',
    "encoder_layer": '''def encoder_layer(x, mask, self_attn, feed_forward, norm1, norm2):
    """Post-norm encoder layer: self-attention, then the FFN, each with Add & Norm."""
    # Your code here (2 lines). self_attn(q, k, v, mask) returns (output, weights).
    raise NotImplementedError
''',
}

SOLUTIONS = {
    "feed_forward": '''import torch


def feed_forward(x, w1, b1, w2, b2):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 for x (..., d_model)."""
    hidden = torch.relu(x @ w1 + b1)  # (..., d_ff)
    return hidden @ w2 + b2  # (..., d_model)
''',
    "encoder_layer_parameters": '''def encoder_layer_parameters(d_model, heads, d_ff):
    """Trained parameters (weights, biases, gamma, beta) of one encoder layer."""
    # W^Q, W^K, W^V, W^O and their biases; any heads
    attention = 4 * (d_model * d_model + d_model)
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model  # W1, b1, W2, b2
    norms = 2 * (2 * d_model)  # two layer norms, gamma and beta each
    return attention + feed_forward + norms
''',
    "encoder_layer": '''def encoder_layer(x, mask, self_attn, feed_forward, norm1, norm2):
    """Post-norm encoder layer: self-attention, then the FFN, each with Add & Norm."""
    x = norm1(x + self_attn(x, x, x, mask)[0])  # (batch, seq, d_model)
    return norm2(x + feed_forward(x))  # (batch, seq, d_model)
''',
}

CHECKERS = {
    "feed_forward": check_feed_forward,
    "encoder_layer_parameters": check_encoder_layer_parameters,
    "encoder_layer": check_encoder_layer,
}

QUESTION = (
    "The source notes sum up the feed-forward network as 'Linear + ReLU + Linear'. Why is the ReLU "
    "essential, and why does 'position-wise' mean padding cannot leak into real tokens through this "
    "sublayer?"
)
ANSWER = (
    "Without the ReLU, x W1 W2 is a single linear map with the matrix W1 W2 (d_model × d_model, rank at "
    "most d_model): the 2048-wide hidden layer would add parameters and no expressive power. "
    "Position-wise means the same two layers are applied to each position's vector on its own; no "
    "position reads another here (only attention mixes positions), so a padded position cannot change "
    "a real one in this sublayer, and the attention masks stop it everywhere else."
)
