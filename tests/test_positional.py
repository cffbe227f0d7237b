"""Unit tests of transformer_book.positional (chapter 1)."""

import math
import re
import warnings

import pytest
import torch

from transformer_book import (
    Embeddings,
    PositionalEncoding,
    check_dropout,
    check_features,
    check_positive,
    check_tensor,
    check_token_ids,
    sinusoidal_table,
)


def formula(pos: int, dimension: int, d_model: int) -> float:
    angle = pos / 10000 ** (2 * (dimension // 2) / d_model)
    return math.sin(angle) if dimension % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize("d_model", [2, 8, 64, 512])
def test_table_matches_the_formula(d_model):
    table = sinusoidal_table(60, d_model)
    assert table.shape == (60, d_model)
    assert table.dtype == torch.float32
    for pos in (0, 1, 7, 59):
        for dimension in range(0, d_model, max(1, d_model // 16)):
            assert table[pos, dimension].item() == pytest.approx(formula(pos, dimension, d_model), abs=1e-6)


def test_position_zero_alternates_zero_and_one():
    assert sinusoidal_table(1, 6)[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


def test_large_positions_stay_accurate():
    # The table is computed in float64: at position 4999 a float32 angle would already be off by ~1e-4.
    assert sinusoidal_table(5000, 8)[4999, 0].item() == pytest.approx(math.sin(4999), abs=1e-6)


@pytest.mark.parametrize("k", [1, 5, 37])
def test_shift_by_k_is_one_rotation_everywhere(k):
    table = sinusoidal_table(200, 32).double()
    sines, cosines = table[k, 0::2], table[k, 1::2]
    rotation = torch.block_diag(
        *[torch.tensor([[c, s], [-s, c]], dtype=torch.float64) for s, c in zip(sines.tolist(), cosines.tolist())]
    )
    assert torch.allclose(table[:-k] @ rotation.T, table[k:], atol=1e-5)


def test_dot_product_depends_only_on_distance():
    table = sinusoidal_table(100, 64).double()
    gram = table @ table.T
    for offset in (0, 3, 40):
        assert torch.diagonal(gram, offset=offset).std() < 1e-5
    assert gram[10, 10].item() == pytest.approx(32.0)


@pytest.mark.parametrize("d_model", [0, -4, 5, 513])
def test_odd_or_nonpositive_d_model_is_refused_by_name(d_model):
    with pytest.raises(ValueError, match=rf"d_model={d_model}\b"):
        sinusoidal_table(10, d_model)
    with pytest.raises(ValueError, match=rf"d_model={d_model}\b"):
        PositionalEncoding(d_model)


def test_nonpositive_max_len_is_refused():
    with pytest.raises(ValueError, match="max_len=0"):
        PositionalEncoding(8, max_len=0)


def test_adds_the_table_and_keeps_shape():
    module = PositionalEncoding(16, max_len=50)
    embeddings = torch.randn(3, 10, 16)
    out = module(embeddings)
    assert out.shape == (3, 10, 16)
    assert torch.allclose(out - embeddings, sinusoidal_table(10, 16).expand(3, -1, -1), atol=1e-6)


def test_sequence_longer_than_the_table_names_both_lengths():
    module = PositionalEncoding(8, max_len=16)
    with pytest.raises(ValueError, match=r"length 20.*max_len=16"):
        module(torch.zeros(2, 20, 8))
    module(torch.zeros(1, 16, 8))  # exactly the table's length is fine


def test_wrong_feature_size_names_the_shapes():
    with pytest.raises(ValueError, match=r"d_model=8.*\(2, 5, 6\)"):
        PositionalEncoding(8)(torch.zeros(2, 5, 6))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_dtype_follows_the_input(dtype):
    out = PositionalEncoding(8, max_len=10)(torch.zeros(1, 3, 8, dtype=dtype))
    assert out.dtype == dtype


def test_buffer_follows_the_module_and_is_not_trained_or_saved():
    module = PositionalEncoding(8, max_len=10).to(torch.float64)
    assert module.table.dtype == torch.float64
    assert list(module.parameters()) == []
    assert "table" not in module.state_dict()
    assert "table" in dict(module.named_buffers())


def test_device_follows_the_module():
    # The "meta" device stands in for a GPU here: tensors with shapes and dtypes but no data. A table
    # left behind on the CPU would make the addition fail with a device mismatch.
    module = PositionalEncoding(8, max_len=10).to("meta")
    assert module.table.device.type == "meta"
    assert module(torch.zeros(1, 3, 8, device="meta")).device.type == "meta"


def test_dropout_only_in_training():
    module = PositionalEncoding(8, max_len=10, dropout=0.5)
    zeros = torch.zeros(4, 10, 8)
    module.eval()
    assert torch.equal(module(zeros), module(zeros))
    module.train()
    torch.manual_seed(0)
    assert (module(zeros) == 0).float().mean() > 0.3  # about half dropped (cos entries are never 0)


def test_embeddings_are_scaled_by_sqrt_d_model():
    embeddings = Embeddings(vocab_size=11, d_model=16)
    tokens = torch.tensor([[1, 2, 3], [4, 5, 10]])
    out = embeddings(tokens)
    assert out.shape == (2, 3, 16)
    assert torch.allclose(out, embeddings.lookup.weight[tokens] * 4.0)


def test_embeddings_gradient_reaches_the_lookup_table():
    embeddings = Embeddings(vocab_size=5, d_model=4)
    embeddings(torch.tensor([[0, 3]])).sum().backward()
    grad = embeddings.lookup.weight.grad
    assert grad[0].abs().sum() > 0 and grad[3].abs().sum() > 0 and grad[1].abs().sum() == 0


def test_embeddings_padding_index_has_zero_vector():
    embeddings = Embeddings(vocab_size=5, d_model=4, padding_idx=0)
    assert torch.equal(embeddings(torch.tensor([[0]])), torch.zeros(1, 1, 4))


@pytest.mark.parametrize(("vocab_size", "d_model"), [(0, 8), (10, 0)])
def test_embeddings_refuse_nonpositive_sizes(vocab_size, d_model):
    with pytest.raises(ValueError, match=f"vocab_size={vocab_size}, d_model={d_model}"):
        Embeddings(vocab_size, d_model)


# --- argument checks (transformer_book.validation, written in chapter 1) -----------------------------


@pytest.mark.parametrize("token", [10, 57, -1])
def test_token_ids_outside_the_vocabulary_are_refused_naming_them(token):
    embeddings = Embeddings(vocab_size=10, d_model=8)
    with pytest.raises(
        ValueError,
        match=rf"tokens must be token ids in \[0, vocab_size=10\); got values from "
        rf"{min(token, 3)} to {max(token, 3)}",
    ):
        embeddings(torch.tensor([[3, token]]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_token_ids_must_be_integers(dtype):
    with pytest.raises(ValueError, match=rf"tokens must be integer token ids; got dtype {dtype}"):
        Embeddings(10, 8)(torch.ones(1, 3, dtype=dtype))


def test_non_tensor_arguments_are_refused_by_name():
    with pytest.raises(TypeError, match=r"tokens must be a torch\.Tensor; got list"):
        Embeddings(10, 8)([[1, 2]])
    with pytest.raises(TypeError, match=r"embeddings must be a torch\.Tensor; got list"):
        PositionalEncoding(8)([[[0.0] * 8]])
    with pytest.raises(ValueError, match=r"embeddings must be a floating-point tensor; got dtype torch\.int64"):
        PositionalEncoding(8)(torch.ones(1, 2, 8, dtype=torch.long))


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 10, float("nan")])
def test_dropout_outside_0_1_is_refused(dropout):
    with pytest.raises(ValueError, match=rf"dropout must be a probability in \[0, 1\); got dropout={dropout}\b"):
        PositionalEncoding(8, dropout=dropout)


@pytest.mark.parametrize("dropout", ["0.1", None, True])
def test_dropout_that_is_not_a_number_is_a_type_error(dropout):
    with pytest.raises(TypeError, match=r"dropout must be a number in \[0, 1\)"):
        check_dropout(dropout)


@pytest.mark.parametrize(
    "sizes, message",
    [
        ({"d_model": 0}, "d_model must be positive; got d_model=0"),
        ({"d_model": 8, "d_ff": -1}, "d_model and d_ff must be positive; got d_model=8, d_ff=-1"),
        (
            {"layers": 2, "heads": 0, "d_model": 0},
            "layers, heads and d_model must be positive; got layers=2, heads=0, d_model=0",
        ),
    ],
)
def test_nonpositive_sizes_are_refused_naming_every_size(sizes, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        check_positive(**sizes)


def test_features_must_end_with_d_model():
    with pytest.raises(ValueError, match=r"^expected a last dimension of d_model=8; got shape \(2, 4\)$"):
        check_features("x", torch.zeros(2, 4), 8, torch.float32)
    with pytest.raises(ValueError, match=r"^expected rows \(\.\.\., 8\); got shape \(\)$"):
        check_features("x", torch.tensor(1.0), 8, torch.float32, expected="rows (..., 8)")
    with pytest.raises(ValueError, match=r"x has dtype torch\.float64, not torch\.float32"):
        check_features("x", torch.zeros(2, 8, dtype=torch.float64), 8, torch.float32)


def test_valid_arguments_pass_the_checks():
    check_dropout(0)
    check_dropout(0.999)
    check_positive(d_model=1, d_ff=4)
    check_features("x", torch.zeros(3, 8), 8, torch.float32)
    check_tensor("x", torch.zeros(2), floating=True, dtype=torch.float32)
    check_token_ids("tokens", torch.tensor([0, 9]), vocab_size=10)
    check_token_ids("tokens", torch.zeros(0, 3, dtype=torch.long), vocab_size=10)  # empty: nothing to check


@pytest.mark.parametrize("shape", [(0, 5), (2, 0), (0, 0)])
def test_empty_batches_and_sequences_do_not_warn(shape):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        embedded = Embeddings(10, 8)(torch.zeros(shape, dtype=torch.long))
        assert PositionalEncoding(8)(embedded).shape == (*shape, 8)
