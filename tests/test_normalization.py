"""Unit tests of transformer_book.normalization (chapter 4, "Add & Norm")."""

import warnings

import pytest
import torch
from torch import nn

from transformer_book import LayerNorm, SublayerConnection


def randomized(d_model: int, eps: float = 1e-5) -> tuple[LayerNorm, nn.LayerNorm]:
    """Our LayerNorm and nn.LayerNorm with the same random gamma and beta (so a swap would show)."""
    ours, theirs = LayerNorm(d_model, eps), nn.LayerNorm(d_model, eps=eps)
    with torch.no_grad():
        ours.gamma.copy_(torch.randn(d_model))
        ours.beta.copy_(torch.randn(d_model))
        theirs.weight.copy_(ours.gamma)
        theirs.bias.copy_(ours.beta)
    return ours, theirs


@pytest.mark.parametrize("d_model", [1, 2, 7, 64, 512])
@pytest.mark.parametrize("eps", [1e-5, 1e-6, 1e-12])
@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 5)])
def test_matches_nn_layer_norm(d_model, eps, shape):
    torch.manual_seed(0)
    ours, theirs = randomized(d_model, eps)
    x = 3 * torch.randn(*shape, d_model) + 2
    assert ours(x).shape == x.shape
    assert torch.allclose(ours(x), theirs(x), atol=1e-5)
    ours64, theirs64 = ours.double(), theirs.double()
    assert torch.allclose(ours64(x.double()), theirs64(x.double()), atol=1e-12)


def test_gradients_match_nn_layer_norm():
    torch.manual_seed(1)
    ours, theirs = randomized(32)
    x = torch.randn(4, 6, 32, requires_grad=True)
    upstream = torch.randn(4, 6, 32)
    ours_grads = torch.autograd.grad(ours(x), (x, ours.gamma, ours.beta), upstream)
    theirs_grads = torch.autograd.grad(theirs(x), (x, theirs.weight, theirs.bias), upstream)
    for mine, pytorch in zip(ours_grads, theirs_grads):
        assert torch.allclose(mine, pytorch, atol=1e-4, rtol=1e-4)


def test_biased_variance_on_a_worked_example():
    # mean 2.5, biased variance 1.25 (the unbiased 1.6667 would give -1.1619 ... 1.1619)
    out = LayerNorm(4)(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    expected = torch.tensor([-1.5, -0.5, 0.5, 1.5]) / (1.25 + 1e-5) ** 0.5
    assert torch.allclose(out, expected, atol=1e-6)
    assert out[0].item() == pytest.approx(-1.3416, abs=1e-4)


def test_eps_is_inside_the_square_root():
    # sigma^2 = 2.5e-7: inside the root, (5e-4) / sqrt(2.5e-7 + 1e-5) = 0.1562; outside it would be ~1.
    out = LayerNorm(2, eps=1e-5).double()(torch.tensor([0.0, 1e-3], dtype=torch.float64))
    assert out.tolist() == pytest.approx([-0.15617, 0.15617], abs=1e-5)


def test_standardizes_each_token_and_ignores_its_scale_and_offset():
    x = 4 * torch.randn(3, 10, 64, dtype=torch.float64) - 1
    exact = LayerNorm(64, eps=0.0).double()
    out = exact(x)
    assert torch.allclose(out.mean(dim=-1), torch.zeros(3, 10, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(out.var(dim=-1, unbiased=False), torch.ones(3, 10, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(exact(7 * x + 3), out, atol=1e-12)


def test_tokens_are_normalized_independently():
    norm = LayerNorm(16)
    x = torch.randn(2, 5, 16)
    edited = x.clone()
    edited[1, 4] = 100 * torch.randn(16)
    assert torch.equal(norm(x)[0], norm(edited)[0])
    assert torch.equal(norm(x)[1, :4], norm(edited)[1, :4])


def test_gamma_and_beta_are_the_parameters():
    norm = LayerNorm(6)
    assert set(norm.state_dict()) == {"gamma", "beta"}
    assert torch.equal(norm.gamma, torch.ones(6)) and torch.equal(norm.beta, torch.zeros(6))
    with torch.no_grad():
        norm.gamma.fill_(2.0)
        norm.beta.fill_(-1.0)
    out = norm(torch.randn(4, 6))
    assert torch.allclose(out.mean(dim=-1), torch.full((4,), -1.0), atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_dtype_follows_the_input(dtype):
    norm = LayerNorm(8).to(dtype)
    assert norm(torch.randn(2, 8).to(dtype)).dtype == dtype


def test_half_precision_constant_token_with_tiny_eps_is_zero_not_nan():
    # 1e-12 is 0 in float16: statistics computed in float16 would give 0 / 0 = NaN here.
    constant = torch.full((2, 8), 0.5, dtype=torch.float16)
    out = LayerNorm(8, eps=1e-12).half()(constant)
    assert not torch.isnan(out).any()
    assert torch.equal(out, torch.zeros_like(out))


def test_device_follows_the_module():
    norm = LayerNorm(8).to("meta")
    assert norm.gamma.device.type == "meta"
    assert norm(torch.zeros(2, 3, 8, device="meta")).device.type == "meta"


@pytest.mark.parametrize("d_model", [0, -3])
def test_nonpositive_d_model_is_refused_by_name(d_model):
    with pytest.raises(ValueError, match=rf"d_model={d_model}\b"):
        LayerNorm(d_model)


def test_negative_eps_is_refused():
    with pytest.raises(ValueError, match=r"eps=-0\.1"):
        LayerNorm(4, eps=-0.1)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_integer_input_is_refused_naming_the_dtype(dtype):
    # Normalized in float32 and cast back, integers would be truncated to -1, 0 or 1.
    counts = torch.randint(0, 10, (2, 8)).to(dtype)
    with pytest.raises(ValueError, match=rf"floating-point.*{dtype}"):
        LayerNorm(8)(counts)


def test_wrong_feature_size_names_d_model_and_the_shape():
    with pytest.raises(ValueError, match=r"d_model=8.*\(2, 5, 6\)"):
        LayerNorm(8)(torch.zeros(2, 5, 6))
    with pytest.raises(ValueError, match=r"d_model=8.*\(\)"):
        LayerNorm(8)(torch.tensor(1.0))


# SublayerConnection


def reference_norm(d_model: int) -> nn.LayerNorm:
    return nn.LayerNorm(d_model)  # gamma = 1, beta = 0, like a fresh SublayerConnection's norm


def test_post_norm_is_norm_of_the_sum():
    torch.manual_seed(2)
    sublayer = nn.Linear(16, 16)
    x = torch.randn(2, 5, 16)
    out = SublayerConnection(16, norm_first=False)(x, sublayer)
    assert torch.allclose(out, reference_norm(16)(x + sublayer(x)), atol=1e-5)


def test_pre_norm_adds_the_sublayer_of_the_normalized_input():
    torch.manual_seed(3)
    sublayer = nn.Linear(16, 16)
    x = torch.randn(2, 5, 16)
    out = SublayerConnection(16, norm_first=True)(x, sublayer)
    assert torch.allclose(out, x + sublayer(reference_norm(16)(x)), atol=1e-5)


def test_post_and_pre_norm_differ():
    torch.manual_seed(4)
    sublayer = nn.Linear(16, 16)
    x = 3 * torch.randn(2, 5, 16)
    assert not torch.allclose(SublayerConnection(16)(x, sublayer), SublayerConnection(16, norm_first=True)(x, sublayer))


def test_dropout_acts_on_the_sublayer_output_only():
    # With p = 1 every update is dropped: post-norm returns LayerNorm(x), pre-norm returns x itself.
    x = torch.randn(3, 4, 8)
    sublayer = nn.Linear(8, 8)
    post = SublayerConnection(8, norm_first=False).train()
    pre = SublayerConnection(8, norm_first=True).train()
    post.dropout.p = pre.dropout.p = 1.0  # past the constructor's check, which refuses 1
    assert torch.allclose(post(x, sublayer), reference_norm(8)(x), atol=1e-5)
    assert torch.equal(pre(x, sublayer), x)
    post.eval()
    assert torch.allclose(post(x, sublayer), reference_norm(8)(x + sublayer(x)), atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_gradients_reach_the_input_the_sublayer_and_the_norm(norm_first):
    connection = SublayerConnection(8, norm_first=norm_first)
    sublayer = nn.Linear(8, 8)
    x = torch.randn(2, 3, 8, requires_grad=True)
    (connection(x, sublayer) * torch.randn(2, 3, 8)).sum().backward()
    for tensor in (x, sublayer.weight, connection.norm.gamma, connection.norm.beta):
        assert tensor.grad is not None and tensor.grad.abs().sum() > 0


def test_eps_and_placement_are_kept():
    connection = SublayerConnection(8, dropout=0.25, norm_first=True, eps=1e-3)
    assert connection.norm.eps == 1e-3
    assert connection.dropout.p == 0.25
    assert "norm_first=True" in repr(connection)


def test_a_sublayer_returning_a_tuple_is_refused_with_advice():
    attention_like = lambda x: (x, None)
    with pytest.raises(TypeError, match=r"tuple.*\[0\]"):
        SublayerConnection(8)(torch.randn(2, 3, 8), attention_like)


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_sublayer_changing_the_shape_is_refused_with_both_shapes(norm_first):
    pooled = lambda x: x.mean(dim=1, keepdim=True)
    with pytest.raises(ValueError, match=r"\(2, 3, 8\).*\(2, 1, 8\)"):
        SublayerConnection(8, norm_first=norm_first)(torch.randn(2, 3, 8), pooled)


def test_sublayer_connection_follows_device_and_dtype():
    connection = SublayerConnection(8).to("meta")
    assert connection(torch.zeros(1, 2, 8, device="meta"), lambda x: 2 * x).device.type == "meta"
    connection64 = SublayerConnection(8, norm_first=True).double()
    assert connection64(torch.randn(1, 2, 8, dtype=torch.float64), torch.tanh).dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.bool])
def test_integer_inputs_are_refused_not_truncated(dtype):
    # Before the check, the result was computed in float32 and converted back: -1, 0 or 1 everywhere.
    with pytest.raises(ValueError, match=rf"x must be a floating-point tensor; got dtype {dtype}"):
        LayerNorm(4)(torch.tensor([[1, 2, 3, 4]]).to(dtype))


def test_inputs_of_another_dtype_than_the_parameters_are_refused():
    with pytest.raises(
        ValueError, match=r"x has dtype torch\.float16, not torch\.float32 like the module's parameters"
    ):
        LayerNorm(4)(torch.ones(2, 4, dtype=torch.float16))
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor; got list"):
        LayerNorm(4)([[1.0, 2.0, 3.0, 4.0]])


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), "1e-5"])
def test_eps_must_be_a_non_negative_number(eps):
    with pytest.raises(ValueError, match=r"eps must be a non-negative number; got eps="):
        LayerNorm(4, eps=eps)


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 10])
def test_sublayer_connection_refuses_dropout_outside_0_1(dropout):
    with pytest.raises(ValueError, match=rf"dropout must be a probability in \[0, 1\); got dropout={dropout}\b"):
        SublayerConnection(8, dropout=dropout)


@pytest.mark.parametrize("shape", [(0, 5, 8), (2, 0, 8), (0, 0, 8)])
def test_empty_batches_and_sequences_do_not_warn(shape):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert LayerNorm(8)(torch.randn(shape)).shape == shape
        for norm_first in (False, True):
            assert SublayerConnection(8, norm_first=norm_first)(torch.randn(shape), nn.Linear(8, 8)).shape == shape
