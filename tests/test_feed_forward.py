"""Unit tests of transformer_book.feed_forward (chapter 5, "Position-wise feed-forward network")."""

import warnings

import pytest
import torch
from torch import nn

from transformer_book import PositionwiseFeedForward


@pytest.mark.parametrize("shape", [(8,), (5, 8), (2, 5, 8), (2, 3, 5, 8)])
def test_keeps_the_shape(shape):
    assert PositionwiseFeedForward(8, 32)(torch.randn(*shape)).shape == shape


def test_matches_the_formula_with_explicit_matrices():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(16, 64)
    x = torch.randn(3, 7, 16)
    W1, b1 = ffn.expand.weight.T, ffn.expand.bias  # (d_model, d_ff): nn.Linear stores the transpose
    W2, b2 = ffn.contract.weight.T, ffn.contract.bias
    assert ffn.expand.weight.shape == (64, 16) and ffn.contract.weight.shape == (16, 64)
    assert torch.allclose(ffn(x), torch.clamp(x @ W1 + b1, min=0) @ W2 + b2, atol=1e-6)


def test_matches_the_feed_forward_block_of_nn_transformer_encoder_layer():
    torch.manual_seed(1)
    theirs = nn.TransformerEncoderLayer(16, 2, 48, dropout=0.1, batch_first=True).eval()
    ours = PositionwiseFeedForward(16, 48, dropout=0.1).eval()
    ours.expand.load_state_dict(theirs.linear1.state_dict())
    ours.contract.load_state_dict(theirs.linear2.state_dict())
    x = torch.randn(2, 5, 16)
    expected = theirs.linear2(theirs.dropout(theirs.activation(theirs.linear1(x))))
    assert torch.allclose(ours(x), expected, atol=1e-6)


def test_is_applied_to_every_position_separately():
    torch.manual_seed(2)
    ffn = PositionwiseFeedForward(8, 32)
    x = torch.randn(2, 6, 8)
    per_position = torch.stack([ffn(x[:, position]) for position in range(6)], dim=1)
    assert torch.allclose(ffn(x), per_position, atol=1e-6)
    shuffle = torch.randperm(6)
    assert torch.allclose(ffn(x[:, shuffle]), ffn(x)[:, shuffle], atol=1e-6)
    edited = x.clone()
    edited[0, 3] += 5.0
    changed = (ffn(edited) - ffn(x)).abs().sum(dim=-1) > 0  # (batch, seq)
    assert changed.nonzero().tolist() == [[0, 3]]


def test_equals_two_convolutions_of_kernel_size_one():
    torch.manual_seed(3)
    ffn = PositionwiseFeedForward(8, 32)
    first, second = nn.Conv1d(8, 32, 1), nn.Conv1d(32, 8, 1)
    with torch.no_grad():
        first.weight.copy_(ffn.expand.weight.unsqueeze(-1))
        first.bias.copy_(ffn.expand.bias)
        second.weight.copy_(ffn.contract.weight.unsqueeze(-1))
        second.bias.copy_(ffn.contract.bias)
    x = torch.randn(2, 9, 8)
    by_convolution = second(torch.relu(first(x.transpose(1, 2)))).transpose(1, 2)
    assert torch.allclose(ffn(x), by_convolution, atol=1e-6)


@pytest.mark.parametrize(("d_model", "d_ff"), [(8, 32), (512, 2048), (10, 3)])
def test_parameter_count(d_model, d_ff):
    ffn = PositionwiseFeedForward(d_model, d_ff)
    assert sum(p.numel() for p in ffn.parameters()) == 2 * d_model * d_ff + d_ff + d_model
    assert (ffn.d_model, ffn.d_ff) == (d_model, d_ff)


def test_relu_zeroes_negative_hidden_units():
    ffn = PositionwiseFeedForward(8, 16)
    with torch.no_grad():
        ffn.expand.weight.zero_()
        ffn.expand.bias.fill_(-1.0)  # every pre-activation is -1: every hidden unit is off
    out = ffn(torch.randn(3, 8))
    assert torch.equal(out, ffn.contract.bias.expand(3, 8))


def test_dropout_acts_on_the_hidden_units_in_training_only():
    ffn = PositionwiseFeedForward(8, 16)
    ffn.dropout.p = 1.0  # past the constructor's check, which refuses 1: drop every hidden unit
    x = torch.randn(4, 8)
    ffn.train()
    assert torch.equal(ffn(x), ffn.contract.bias.expand(4, 8))  # every hidden unit dropped
    ffn.eval()
    assert not torch.equal(ffn(x), ffn.contract.bias.expand(4, 8))
    half = PositionwiseFeedForward(8, 16, dropout=0.5).train()
    torch.manual_seed(4)
    assert not torch.equal(half(x), half(x))


def test_gradients_reach_both_linear_layers_and_the_input():
    ffn = PositionwiseFeedForward(8, 32)
    x = torch.randn(2, 5, 8, requires_grad=True)
    ffn(x).pow(2).sum().backward()
    for tensor in (x, ffn.expand.weight, ffn.expand.bias, ffn.contract.weight, ffn.contract.bias):
        assert tensor.grad is not None and tensor.grad.abs().sum() > 0


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_dtype_follows_the_module_and_input(dtype):
    ffn = PositionwiseFeedForward(8, 16).to(dtype)
    assert ffn(torch.randn(2, 8).to(dtype)).dtype == dtype


def test_device_follows_the_module():
    ffn = PositionwiseFeedForward(8, 16).to("meta")
    assert ffn(torch.zeros(2, 3, 8, device="meta")).device.type == "meta"


@pytest.mark.parametrize(("d_model", "d_ff"), [(0, 16), (8, 0), (-1, 4)])
def test_nonpositive_sizes_are_refused_by_name(d_model, d_ff):
    with pytest.raises(ValueError, match=rf"d_model={d_model}, d_ff={d_ff}\b"):
        PositionwiseFeedForward(d_model, d_ff)


def test_wrong_feature_size_names_d_model_and_the_shape():
    with pytest.raises(ValueError, match=r"d_model=8.*\(2, 5, 6\)"):
        PositionwiseFeedForward(8, 16)(torch.zeros(2, 5, 6))


@pytest.mark.parametrize("dropout", [-0.5, 1.0, 2])
def test_dropout_outside_0_1_is_refused(dropout):
    with pytest.raises(ValueError, match=rf"dropout must be a probability in \[0, 1\); got dropout={dropout}\b"):
        PositionwiseFeedForward(8, 16, dropout=dropout)


def test_inputs_that_are_not_float_tensors_of_the_weights_dtype_are_refused():
    ffn = PositionwiseFeedForward(8, 16)
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor; got list"):
        ffn([[0.0] * 8])
    with pytest.raises(ValueError, match=r"x must be a floating-point tensor; got dtype torch\.int64"):
        ffn(torch.ones(2, 8, dtype=torch.long))
    with pytest.raises(
        ValueError, match=r"x has dtype torch\.float16, not torch\.float32 like the module's parameters"
    ):
        ffn(torch.ones(2, 8, dtype=torch.float16))


@pytest.mark.parametrize("shape", [(0, 5, 8), (2, 0, 8)])
def test_empty_batches_and_sequences_do_not_warn(shape):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert PositionwiseFeedForward(8, 16)(torch.randn(shape)).shape == shape
