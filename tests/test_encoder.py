"""Unit tests of transformer_book.encoder (chapter 5: the encoder layer and the encoder stack).

What the encoder layer and the decoder layer both promise (every norm's eps checked when loading,
dropout a probability) is tested once for both, in tests/test_decoder.py."""

import warnings

import pytest
import torch
from torch import nn

from transformer_book import Encoder, EncoderLayer, load_torch_encoder_layer

D_MODEL, HEADS, D_FF = 32, 4, 64


def padded_batch(seed: int = 0):
    """x (3, 6, d_model), our mask (3, 1, 6) True = may attend, PyTorch's (3, 6) True = ignore, keep (3, 6)."""
    torch.manual_seed(seed)
    x = torch.randn(3, 6, D_MODEL)
    keep = torch.arange(6) < torch.tensor([6, 4, 1])[:, None]
    return x, keep[:, None, :], ~keep, keep


def pair(norm_first: bool, seed: int = 0) -> tuple[EncoderLayer, nn.TransformerEncoderLayer]:
    torch.manual_seed(seed)
    theirs = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, batch_first=True, norm_first=norm_first)
    ours = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)
    return ours.eval(), theirs.eval()


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_layer_matches_nn_transformer_encoder_layer(norm_first, masked):
    ours, theirs = pair(norm_first)
    x, our_mask, their_mask, _ = padded_batch()
    with torch.no_grad():
        assert not torch.allclose(ours(x), theirs(x), atol=1e-3)  # different random weights before loading
        assert load_torch_encoder_layer(ours, theirs) is ours
        if masked:
            assert torch.allclose(ours(x, our_mask), theirs(x, src_key_padding_mask=their_mask), atol=1e-5)
        else:
            assert torch.allclose(ours(x), theirs(x), atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stack_matches_nn_transformer_encoder(norm_first):
    torch.manual_seed(5)
    their_layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, batch_first=True, norm_first=norm_first)
    theirs = nn.TransformerEncoder(
        their_layer, 3, norm=nn.LayerNorm(D_MODEL) if norm_first else None, enable_nested_tensor=False
    ).eval()
    with torch.no_grad():
        for norm in [theirs.norm] if norm_first else []:
            norm.weight.normal_()
            norm.bias.normal_()
    ours = Encoder(EncoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first), 3, final_norm=norm_first).eval()
    with torch.no_grad():
        for our_layer, their_layer in zip(ours.layers, theirs.layers):
            load_torch_encoder_layer(our_layer, their_layer)
        if norm_first:
            ours.norm.gamma.copy_(theirs.norm.weight)
            ours.norm.beta.copy_(theirs.norm.bias)
        x, our_mask, their_mask, _ = padded_batch(1)
        assert torch.allclose(ours(x, our_mask), theirs(x, src_key_padding_mask=their_mask), atol=1e-5)


def test_stack_matches_pytorch_fast_path_on_real_tokens():
    # nn.TransformerEncoder's nested-tensor fast path (eval, post-norm, padding mask) zeroes padded outputs.
    torch.manual_seed(6)
    theirs = nn.TransformerEncoder(nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, batch_first=True), 2).eval()
    ours = Encoder(EncoderLayer(D_MODEL, HEADS, D_FF), 2, final_norm=False).eval()
    x, our_mask, their_mask, keep = padded_batch(2)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
        for our_layer, their_layer in zip(ours.layers, theirs.layers):
            load_torch_encoder_layer(our_layer, their_layer)
        our_output, their_output = ours(x, our_mask), theirs(x, src_key_padding_mask=their_mask)
    assert torch.allclose(our_output[keep], their_output[keep], atol=1e-5)


def test_attention_weights_are_kept_only_when_asked():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF).eval()
    assert layer.attention_weights is None
    x, our_mask, _, keep = padded_batch()
    with torch.no_grad():
        without = layer(x, our_mask)
        assert layer.attention_weights is None
        with_weights = layer(x, our_mask, need_weights=True)
    weights = layer.attention_weights
    assert torch.allclose(without, with_weights, atol=1e-5)  # the two attention paths agree
    assert weights.shape == (3, HEADS, 6, 6)
    assert torch.allclose(weights.sum(dim=-1), torch.ones(3, HEADS, 6), atol=1e-6)
    assert torch.equal(weights.masked_select(~keep[:, None, None, :]), torch.zeros(int((~keep).sum()) * HEADS * 6))


def test_padded_positions_do_not_reach_real_tokens():
    encoder = Encoder(EncoderLayer(D_MODEL, HEADS, D_FF), 2).eval()
    x, our_mask, _, keep = padded_batch(3)
    scrambled = torch.where(keep[..., None], x, 50 * torch.randn_like(x))
    with torch.no_grad():
        assert torch.allclose(encoder(x, our_mask)[keep], encoder(scrambled, our_mask)[keep], atol=1e-5)
        assert not torch.allclose(encoder(x)[keep], encoder(scrambled)[keep], atol=1e-2)


def test_a_causal_mask_is_accepted_and_respected():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF).eval()
    x = torch.randn(2, 5, D_MODEL)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool)).expand(2, 5, 5)  # (batch, source, source)
    edited = x.clone()
    edited[:, 4] = torch.randn(2, D_MODEL)
    with torch.no_grad():
        assert torch.allclose(layer(x, causal)[:, :4], layer(edited, causal)[:, :4], atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_every_parameter_gets_a_gradient(norm_first):
    encoder = Encoder(EncoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first), 2)
    x, our_mask, _, _ = padded_batch()
    (encoder(x, our_mask) * torch.randn(3, 6, D_MODEL)).sum().backward()
    missing = [name for name, parameter in encoder.named_parameters() if parameter.grad is None]
    assert missing == []


def test_final_norm_normalizes_a_pre_norm_stack_and_can_be_left_out():
    x = 3 * torch.randn(2, 5, D_MODEL)
    with_norm = Encoder(EncoderLayer(D_MODEL, HEADS, D_FF, norm_first=True), 4).eval()
    without_norm = Encoder(EncoderLayer(D_MODEL, HEADS, D_FF, norm_first=True), 4, final_norm=False).eval()
    assert isinstance(without_norm.norm, nn.Identity)
    with torch.no_grad():
        normalized = with_norm(x)
        assert torch.allclose(normalized.mean(dim=-1), torch.zeros(2, 5), atol=1e-5)
        assert torch.allclose(normalized.var(dim=-1, unbiased=False), torch.ones(2, 5), atol=1e-3)
        assert without_norm(x).var(dim=-1, unbiased=False).mean() > 2.0  # the raw, growing stream


def test_layers_are_independent_copies():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF)
    encoder = Encoder(layer, 3)
    assert len(encoder.layers) == 3
    assert all(copy is not layer for copy in encoder.layers)
    first, second = encoder.layers[0].feed_forward.expand.weight, encoder.layers[1].feed_forward.expand.weight
    assert torch.equal(first, second)
    with torch.no_grad():
        first.add_(1.0)
    assert not torch.equal(first, second)
    count = lambda module: sum(p.numel() for p in module.parameters())
    assert count(encoder) == 3 * count(layer) + 2 * D_MODEL


def test_dropout_only_in_training():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.5)
    x = torch.randn(2, 5, D_MODEL)
    layer.train()
    assert not torch.equal(layer(x), layer(x))
    layer.eval()
    assert torch.equal(layer(x), layer(x))


def test_dtype_and_device_follow_the_module():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF).double().eval()
    assert layer(torch.randn(1, 3, D_MODEL, dtype=torch.float64)).dtype == torch.float64
    encoder = Encoder(EncoderLayer(D_MODEL, HEADS, D_FF), 2).to("meta")
    assert encoder(torch.zeros(1, 3, D_MODEL, device="meta")).device.type == "meta"


def test_bad_sizes_are_refused_by_name():
    with pytest.raises(ValueError, match=r"num_layers=0\b"):
        Encoder(EncoderLayer(D_MODEL, HEADS, D_FF), 0)
    with pytest.raises(ValueError, match=r"d_model=30, heads=4"):
        EncoderLayer(30, 4, D_FF)
    with pytest.raises(ValueError, match=r"d_model=32, d_ff=0"):
        EncoderLayer(D_MODEL, HEADS, 0)


@pytest.mark.parametrize(
    ("theirs_kwargs", "message"),
    [
        (
            {"dim_feedforward": 128},
            r"ours d_model=32, heads=4, d_ff=64; theirs d_model=32, nhead=4, dim_feedforward=128",
        ),
        ({"nhead": 2}, r"heads=4.*nhead=2"),
        ({"norm_first": True}, r"ours norm_first=False, theirs norm_first=True"),
        ({"activation": "gelu"}, r"activation=gelu"),
        ({"layer_norm_eps": 1e-6}, r"ours eps=1e-05, theirs eps=1e-06"),
    ],
)
def test_loading_a_different_layer_is_refused_naming_both_values(theirs_kwargs, message):
    kwargs = {"d_model": D_MODEL, "nhead": HEADS, "dim_feedforward": D_FF, "batch_first": True, **theirs_kwargs}
    theirs = nn.TransformerEncoderLayer(**kwargs)
    with pytest.raises(ValueError, match=message):
        load_torch_encoder_layer(EncoderLayer(D_MODEL, HEADS, D_FF), theirs)


def test_a_batch_keys_padding_mask_is_refused_even_when_batch_equals_seq():
    # The bug this rule removes: (batch, keys) read as (queries, keys) when batch == seq, silently.
    encoder = Encoder(EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0), 2).eval()
    x = torch.randn(4, 4, D_MODEL)
    keep = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    with pytest.raises(ValueError, match=r"got shape \(4, 4\).*mask\.unsqueeze\(1\)"):
        encoder(x, keep)
    right = encoder(x, keep.unsqueeze(1))  # (batch, 1, keys)
    misread = encoder(x, keep.unsqueeze(0))  # what broadcasting made of it: (1, queries, keys)
    assert not torch.allclose(right, misread, atol=1e-4)


def test_non_tensor_and_wrong_dtype_inputs_are_refused_by_name():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF)
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor; got list"):
        layer([[[0.0] * D_MODEL]])
    with pytest.raises(ValueError, match=r"x must be a floating-point tensor; got dtype torch\.int64"):
        layer(torch.ones(2, 3, D_MODEL, dtype=torch.long))
    with pytest.raises(ValueError, match=r"has dtype torch\.float64, not torch\.float32 like the module's parameters"):
        layer(torch.ones(2, 3, D_MODEL, dtype=torch.float64))


@pytest.mark.parametrize("shape", [(0, 5, D_MODEL), (2, 0, D_MODEL)])
def test_empty_batches_and_sequences_do_not_warn(shape):
    encoder = Encoder(EncoderLayer(D_MODEL, HEADS, D_FF), 2).eval()
    mask = torch.ones(shape[0], 1, shape[1], dtype=torch.bool)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert encoder(torch.randn(shape), mask).shape == shape
