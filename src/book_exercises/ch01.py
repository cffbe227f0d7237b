"""Chapter 1 exercises: positional encoding.

    from book_exercises import check
    check(sinusoidal_table, device=device)

Each check calls the reader's function on CPU tensors (pass ``device=`` to move the inputs) and
compares its output, moved to the CPU, with the companion package's.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from book_exercises.core import Case, Mistake, exercise
from transformer_book import Embeddings, PositionalEncoding, sinusoidal_table

# ---------------------------------------------------------------------------------------------
# Exercise 1: the sinusoidal table


def _table(
    max_len,
    d_model,
    frequency_of,
    even=torch.sin,
    odd=torch.cos,
    layout="interleaved",
    first_position=0,
    zero_row_0=False,
):
    """A table built the way a mistaken solution would build it."""
    position = torch.arange(first_position, first_position + max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    dims = torch.arange(d_model, dtype=torch.float64)  # (d_model,)
    angle = position * frequency_of(dims, d_model)  # (max_len, d_model)
    if layout == "interleaved":
        table = torch.where(dims.long() % 2 == 0, even(angle), odd(angle))
    else:  # all sines first, then all cosines (TensorFlow's tutorial)
        table = torch.cat([even(angle[:, 0::2]), odd(angle[:, 0::2])], dim=1)
    if zero_row_0:
        table[0] = 0.0
    return table.float()


def _paired(dims, d_model):  # the paper: dimensions 2i and 2i+1 share w_i = 10000^(-2i/d)
    return 10000.0 ** (-(2 * (dims // 2)) / d_model)


def _table_cases():
    return [
        Case((6, 4), "max_len=6, d_model=4"),
        Case((50, 16), "max_len=50, d_model=16"),
        Case((1, 2), "max_len=1, d_model=2 (one position)"),
        Case((100, 64), "max_len=100, d_model=64"),
    ]


exercise(
    task="Build the (max_len, d_model) table PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...).",
    cases=_table_cases,
    atol=1e-4,
    mistakes=[
        Mistake(
            "sin and cos are swapped: even dimensions 2i take the sine, odd dimensions 2i+1 the "
            "cosine (so position 0 is (0, 1, 0, 1, ...)).",
            lambda n, d: _table(n, d, _paired, even=torch.cos, odd=torch.sin),
        ),
        Mistake(
            "the exponent uses the dimension index j instead of the pair index: dimensions 2i and "
            "2i+1 must share one frequency 10000^(-2i/d_model), e.g. with 2 * (j // 2) "
            "(the bug of the source notes' NumPy version).",
            lambda n, d: _table(n, d, lambda j, dm: 10000.0 ** (-2 * j / dm)),
        ),
        Mistake(
            "the exponent uses the dimension index j (10000^(-j/d_model)); the cosine in "
            "dimension 2i+1 must use the same frequency as the sine in dimension 2i: "
            "10000^(-2i/d_model) with i = j // 2.",
            lambda n, d: _table(n, d, lambda j, dm: 10000.0 ** (-j / dm)),
        ),
        Mistake(
            "you put all the sines first and all the cosines after (the layout of TensorFlow's "
            "tutorial); the paper interleaves them: sin in the even dimensions, cos in the odd ones.",
            lambda n, d: _table(n, d, _paired, layout="concatenated"),
        ),
        Mistake(
            "position 0 must be encoded as (0, 1, 0, 1, ...), not as zeros (the source notes' "
            "NumPy version special-cases it).",
            lambda n, d: _table(n, d, _paired, zero_row_0=True),
        ),
        Mistake(
            "your positions start at 1; the first token is position 0 (torch.arange(max_len)).",
            lambda n, d: _table(n, d, _paired, first_position=1),
        ),
        Mistake(
            "the frequencies grow instead of falling: divide pos by 10000^(2i/d_model) (or "
            "multiply by 10000^(-2i/d_model)).",
            lambda n, d: _table(n, d, lambda j, dm: 10000.0 ** (2 * (j // 2) / dm)),
        ),
        Mistake(
            "your table is transposed: return shape (max_len, d_model), one row per position.",
            lambda n, d: sinusoidal_table(n, d).T,
        ),
    ],
)(sinusoidal_table)


# ---------------------------------------------------------------------------------------------
# Exercise 2: the shift matrix M_k with PE[pos + k] = M_k PE[pos]


def _shift_cases():
    return [
        Case((1, 4), "k=1, d_model=4"),
        Case((5, 16), "k=5, d_model=16"),
        Case((0, 8), "k=0 (no shift), d_model=8"),
        Case((37, 2), "k=37, d_model=2"),
    ]


def _describe_shift(got, expected, case):
    k, d_model = case.args
    table = sinusoidal_table(k + 12, d_model).double()
    error = (table[:12] @ got.double().T - table[k : k + 12]).abs().max().item()
    return (
        f"for {case.label}, M_k @ PE[pos] should equal PE[pos + k], but it is off by up to "
        f"{error:.3g}. Each pair (2i, 2i+1) is rotated by the angle k * w_i."
    )


@exercise(
    cases=_shift_cases,
    atol=1e-4,
    describe=_describe_shift,
    mistakes=[
        Mistake(
            "your matrix rotates backwards: it maps PE[pos + k] to PE[pos] (it is M_k transposed). "
            "Check the signs: sin(a + b) = sin a cos b + cos a sin b, "
            "cos(a + b) = cos a cos b - sin a sin b.",
            lambda k, d: shift_matrix(k, d).T,
        ),
        Mistake(
            "you built the matrix from the encoding of position 1 instead of position k: the "
            "rotation angle of pair i is k * w_i.",
            lambda k, d: shift_matrix(1, d),
        ),
    ],
)
def shift_matrix(k, d_model):
    """Build the (d_model, d_model) matrix M_k with PE[pos + k] = M_k @ PE[pos] for every pos."""
    table = sinusoidal_table(k + 1, d_model).double()
    sin_k, cos_k = table[k, 0::2], table[k, 1::2]  # (d_model/2,)
    matrix = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    matrix[even, even], matrix[even, even + 1] = cos_k, sin_k
    matrix[even + 1, even], matrix[even + 1, even + 1] = -sin_k, cos_k
    return matrix.float()


# ---------------------------------------------------------------------------------------------
# Exercise 3: the input layer, embeddings * sqrt(d_model) + positions


def _embed_cases():
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(11, 8, generator=generator)
    return [
        Case((torch.tensor([[1, 2, 3, 0]]), weight), "one sentence of 4 tokens, d_model=8"),
        Case((torch.randint(0, 11, (3, 7), generator=generator), weight), "a (3, 7) batch"),
        Case(
            (torch.tensor([[5]]), nn.init.xavier_uniform_(torch.empty(11, 8))), "one token, Xavier-initialised weights"
        ),
    ]


def _embed_variant(scale_embedding, with_positions=True, scale_positions=False, length_axis=1):
    def compute(tokens, weight):
        d_model = weight.size(1)
        vectors = weight[tokens] * scale_embedding(d_model)  # (batch, seq, d_model)
        if not with_positions:
            return vectors
        positions = sinusoidal_table(tokens.size(length_axis), d_model)  # (seq, d_model)
        if scale_positions:
            return (weight[tokens] + positions) * math.sqrt(d_model)
        return vectors + positions

    return compute


@exercise(
    cases=_embed_cases,
    mistakes=[
        Mistake(
            "the embeddings are not multiplied by sqrt(d_model) (the paper's section 3.4).",
            _embed_variant(lambda d: 1.0),
        ),
        Mistake(
            "you multiplied by d_model; the paper multiplies the embeddings by sqrt(d_model).",
            _embed_variant(lambda d: float(d)),
        ),
        Mistake(
            "you divided by sqrt(d_model); the paper multiplies the embeddings by it.",
            _embed_variant(lambda d: 1 / math.sqrt(d)),
        ),
        Mistake(
            "the positional encodings are missing: add sinusoidal_table(seq, d_model).",
            _embed_variant(lambda d: math.sqrt(d), with_positions=False),
        ),
        Mistake(
            "you scaled the positions too: only the embeddings are multiplied by sqrt(d_model), "
            "then the encodings are added.",
            _embed_variant(lambda d: math.sqrt(d), scale_positions=True),
        ),
        Mistake(
            "the table and the embeddings do not line up: take the first seq rows of the table, "
            "sinusoidal_table(tokens.size(1), d_model), and add it to the (batch, seq, d_model) "
            "embeddings (it broadcasts over the batch).",
            _embed_variant(lambda d: math.sqrt(d), length_axis=0),
        ),
    ],
)
def embed_with_positions(tokens, weight):
    """Look the tokens up in `weight`, multiply by sqrt(d_model) and add the sinusoidal encodings."""
    vocab_size, d_model = weight.shape
    embed = Embeddings(vocab_size, d_model)
    with torch.no_grad():
        embed.lookup.weight.copy_(weight)
    return PositionalEncoding(d_model, max_len=64)(embed(tokens))  # (batch, seq, d_model)
