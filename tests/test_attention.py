"""Unit tests of transformer_book.attention (chapter 2)."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_book import check_mask, scaled_dot_product_attention


def random_qkv(*leading, queries=5, keys=7, d_k=8, d_v=6, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(*leading, queries, d_k, generator=generator, dtype=dtype)
    key = torch.randn(*leading, keys, d_k, generator=generator, dtype=dtype)
    value = torch.randn(*leading, keys, d_v, generator=generator, dtype=dtype)
    return query, key, value


@pytest.mark.parametrize("leading", [(), (3,), (2, 4), (2, 3, 2)])
def test_shapes_follow_queries_and_values(leading):
    query, key, value = random_qkv(*leading)
    output, weights = scaled_dot_product_attention(query, key, value)
    assert output.shape == (*leading, 5, 6)
    assert weights.shape == (*leading, 5, 7)


def test_matches_the_formula_written_out():
    query, key, value = random_qkv(2, dtype=torch.float64)
    output, weights = scaled_dot_product_attention(query, key, value)
    expected_weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(8), dim=-1)
    assert torch.allclose(weights, expected_weights)
    assert torch.allclose(output, expected_weights @ value)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 5, dtype=torch.float64))


def test_thinking_machines_numbers():
    # Seed 004: scores 112 and 96, divided by sqrt(64) = 8, give softmax weights 0.88 and 0.12.
    query = torch.zeros(1, 64)
    query[0, 0] = 1.0
    key = torch.zeros(2, 64)
    key[:, 0] = torch.tensor([112.0, 96.0])
    value = torch.eye(2)
    output, weights = scaled_dot_product_attention(query, key, value)
    assert weights[0].tolist() == pytest.approx([0.8808, 0.1192], abs=1e-4)
    assert torch.allclose(output, weights)


@pytest.mark.parametrize("mask_kind", ["none", "random", "causal", "key_padding"])
def test_parity_with_torch(mask_kind):
    query, key, value = random_qkv(2, 3)
    if mask_kind == "none":
        mask = None
    elif mask_kind == "random":
        mask = torch.rand(2, 1, 5, 7, generator=torch.Generator().manual_seed(1)) > 0.5
        mask[..., 0] = True  # no fully masked rows: those are tested separately
    elif mask_kind == "causal":
        mask = torch.ones(5, 7, dtype=torch.bool).tril(diagonal=2)
    else:
        mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3]).view(2, 1, 1, 7)
    ours, weights = scaled_dot_product_attention(query, key, value, mask=mask)
    theirs = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    assert torch.allclose(ours, theirs, atol=1e-6)
    if mask is not None:
        assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()
        assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 5))


@pytest.mark.parametrize("scale", [1.0, 0.05])
def test_scale_replaces_one_over_sqrt_d_k(scale):
    query, key, value = random_qkv(2, dtype=torch.float64)
    _, weights = scaled_dot_product_attention(query, key, value, scale=scale)
    assert torch.allclose(weights, torch.softmax(scale * query @ key.transpose(-2, -1), dim=-1))
    ours, _ = scaled_dot_product_attention(query, key, value, scale=scale)
    assert torch.allclose(ours, F.scaled_dot_product_attention(query, key, value, scale=scale))


def test_fully_masked_row_gives_zeros_not_nan_and_finite_gradients():
    query, key, value = random_qkv(2)
    for tensor in (query, key, value):
        tensor.requires_grad_(True)
    mask = torch.ones(2, 5, 7, dtype=torch.bool)
    mask[1, 3] = False  # query 3 of sequence 1 may attend to nothing
    output, weights = scaled_dot_product_attention(query, key, value, mask=mask)
    assert torch.equal(weights[1, 3], torch.zeros(7))
    assert torch.equal(output[1, 3], torch.zeros(6))
    assert torch.isfinite(output).all()
    output.sum().backward()
    assert all(torch.isfinite(tensor.grad).all() for tensor in (query, key, value))
    assert torch.allclose(output, F.scaled_dot_product_attention(query, key, value, attn_mask=mask), atol=1e-6)


def test_masked_keys_get_no_gradient_and_no_influence():
    query, key, value = random_qkv(1)
    value.requires_grad_(True)
    mask = torch.tensor([True] * 4 + [False] * 3)  # (keys,): broadcasts to every query
    output, _ = scaled_dot_product_attention(query, key, value, mask=mask)
    output.sum().backward()
    assert value.grad[0, 4:].abs().sum() == 0 and value.grad[0, :4].abs().sum() > 0
    changed = value.detach().clone()
    changed[0, 4:] += 100.0
    assert torch.allclose(scaled_dot_product_attention(query, key, changed, mask=mask)[0], output)


def test_gradients_reach_queries_keys_and_values():
    query, key, value = random_qkv(2)
    for tensor in (query, key, value):
        tensor.requires_grad_(True)
    output, _ = scaled_dot_product_attention(query, key, value)
    (output * torch.randn_like(output)).sum().backward()
    for tensor in (query, key, value):
        assert tensor.grad is not None and tensor.grad.abs().sum() > 0


def test_dropout_acts_on_the_weights_only_in_training():
    query, key, value = random_qkv(4, queries=16, keys=16)
    dropout = nn.Dropout(0.5)
    dropout.eval()
    _, weights = scaled_dot_product_attention(query, key, value, dropout=dropout)
    assert torch.allclose(weights.sum(-1), torch.ones(4, 16))
    dropout.train()
    torch.manual_seed(0)
    output, dropped = scaled_dot_product_attention(query, key, value, dropout=dropout)
    assert 0.3 < (dropped == 0).float().mean() < 0.7
    assert torch.allclose(output, dropped @ value)  # the output uses the dropped weights
    kept = dropped != 0
    assert torch.allclose(dropped[kept], 2 * weights[kept])  # survivors are divided by 1 - p


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_dtype_follows_the_input(dtype):
    query, key, value = random_qkv(2, dtype=dtype)
    mask = torch.ones(5, 7, dtype=torch.bool).tril()
    output, weights = scaled_dot_product_attention(query, key, value, mask=mask)
    assert output.dtype == dtype and weights.dtype == dtype
    assert torch.isfinite(output).all()  # -inf fits every float format (unlike -1e9 in float16)


def test_device_follows_the_input():
    # The "meta" device stands in for a GPU: a tensor created on the CPU inside the function would fail.
    query, key, value = (tensor.to("meta") for tensor in random_qkv(2))
    mask = torch.ones(2, 5, 7, dtype=torch.bool, device="meta")
    output, weights = scaled_dot_product_attention(query, key, value, mask=mask)
    assert output.device.type == "meta" and weights.device.type == "meta"
    assert output.shape == (2, 5, 6)


def test_mismatched_query_and_key_widths_are_named():
    query, key, value = random_qkv(2)
    with pytest.raises(ValueError, match=r"d_k; got 8 and 4"):
        scaled_dot_product_attention(query, key[..., :4], value)


def test_every_key_needs_a_value():
    query, key, value = random_qkv(2)
    with pytest.raises(ValueError, match=r"7 keys and 6 values"):
        scaled_dot_product_attention(query, key, value[:, :6])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_non_boolean_masks_are_refused(dtype):
    query, key, value = random_qkv(2)
    with pytest.raises(ValueError, match=str(dtype).replace(".", r"\.")):
        scaled_dot_product_attention(query, key, value, mask=torch.ones(2, 5, 7, dtype=dtype))


@pytest.mark.parametrize("shape", [(2, 5, 6), (3, 5, 7), (4, 2, 5, 7), (5,)])
def test_masks_that_do_not_broadcast_to_the_scores_are_named(shape):
    query, key, value = random_qkv(2)
    pattern = r"mask of shape \(" + ", ".join(map(str, shape)) + r",?\).*\(2, 5, 7\)"
    with pytest.raises(ValueError, match=pattern):
        scaled_dot_product_attention(query, key, value, mask=torch.ones(shape, dtype=torch.bool))


def test_check_mask_accepts_broadcastable_masks():
    for shape in [(7,), (5, 7), (1, 7), (2, 1, 7), (2, 5, 7)]:
        check_mask(torch.ones(shape, dtype=torch.bool), torch.Size((2, 5, 7)))


def test_non_tensor_arguments_are_refused_by_name():
    query = torch.randn(2, 3, 4)
    with pytest.raises(TypeError, match=r"key must be a torch\.Tensor; got list"):
        scaled_dot_product_attention(query, query.tolist(), query)
    with pytest.raises(TypeError, match=r"mask must be a torch\.Tensor; got list"):
        scaled_dot_product_attention(query, query, query, mask=[[True] * 3] * 3)


def test_keys_and_values_must_have_the_queries_dtype():
    query = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"value has dtype torch\.float64, not torch\.float32 like the query"):
        scaled_dot_product_attention(query, query, query.double())
    with pytest.raises(ValueError, match=r"query must be a floating-point tensor; got dtype torch\.int64"):
        scaled_dot_product_attention(query.long(), query, query)


@pytest.mark.parametrize(("queries", "keys"), [(0, 4), (3, 0), (0, 0)])
def test_empty_sequences_do_not_warn(queries, keys):
    query, key = torch.randn(2, queries, 4), torch.randn(2, keys, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        output, weights = scaled_dot_product_attention(query, key, key, torch.ones(2, 1, keys, dtype=torch.bool))
    assert output.shape == (2, queries, 4) and weights.shape == (2, queries, keys)
