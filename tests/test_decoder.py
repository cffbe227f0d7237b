"""Unit tests of transformer_book.decoder (chapter 7: the decoder layer, the decoder stack, cross-attention)."""

import re
import warnings

import pytest
import torch
from torch import nn

from transformer_book import (
    Decoder,
    DecoderLayer,
    EncoderLayer,
    load_torch_decoder_layer,
    load_torch_encoder_layer,
    padding_mask,
    subsequent_mask,
    target_mask,
)

D_MODEL, HEADS, D_FF = 32, 4, 64
PAD = 0


def batch(seed: int = 0, target_len: int = 5, source_len: int = 7):
    """x (3, target, d), memory (3, source, d), and padded token ids for the masks (different lengths)."""
    torch.manual_seed(seed)
    x = torch.randn(3, target_len, D_MODEL)
    memory = torch.randn(3, source_len, D_MODEL)
    source = torch.randint(1, 9, (3, source_len)).masked_fill(
        torch.arange(source_len) >= torch.tensor([source_len, 4, 1])[:, None], PAD
    )
    target = torch.randint(1, 9, (3, target_len)).masked_fill(
        torch.arange(target_len) >= torch.tensor([target_len, 3, 2])[:, None], PAD
    )
    return x, memory, source, target


def pair(norm_first: bool, seed: int = 0):
    torch.manual_seed(seed)
    theirs = nn.TransformerDecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, batch_first=True, norm_first=norm_first)
    ours = DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)
    return ours.eval(), theirs.eval()


def masked_outputs(ours, theirs, x, memory, source, target):
    """Our decoder (or layer) and PyTorch's on one batch with the look-ahead and padding masks,
    each written in its own convention (ours: True = may attend; PyTorch's: True = blocked)."""
    expected = theirs(
        x,
        memory,
        tgt_mask=~subsequent_mask(target.size(1))[0],
        tgt_key_padding_mask=target == PAD,
        memory_key_padding_mask=source == PAD,
    )
    return ours(x, memory, padding_mask(source, PAD), target_mask(target, PAD)), expected


# --- parity with PyTorch --------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_layer_matches_nn_transformer_decoder_layer(norm_first, masked):
    ours, theirs = pair(norm_first)
    x, memory, source, target = batch()
    with torch.no_grad():
        assert not torch.allclose(ours(x, memory), theirs(x, memory), atol=1e-3)  # before loading: different
        assert load_torch_decoder_layer(ours, theirs) is ours
        if masked:
            actual, expected = masked_outputs(ours, theirs, x, memory, source, target)
        else:
            expected, actual = theirs(x, memory), ours(x, memory)
    assert torch.allclose(actual, expected, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stack_matches_nn_transformer_decoder(norm_first):
    torch.manual_seed(3)
    their_layer = nn.TransformerDecoderLayer(D_MODEL, HEADS, D_FF, batch_first=True, norm_first=norm_first)
    theirs = nn.TransformerDecoder(their_layer, 3, norm=nn.LayerNorm(D_MODEL)).eval()
    ours = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first), 3).eval()
    with torch.no_grad():
        for layer in theirs.layers:
            for parameter in layer.parameters():
                parameter.add_(0.1 * torch.randn_like(parameter))
        theirs.norm.weight.normal_()
        theirs.norm.bias.normal_()
        for our_layer, their_layer in zip(ours.layers, theirs.layers):
            load_torch_decoder_layer(our_layer, their_layer)
        ours.norm.gamma.copy_(theirs.norm.weight)
        ours.norm.beta.copy_(theirs.norm.bias)
        actual, expected = masked_outputs(ours, theirs, *batch(1))
    assert torch.allclose(actual, expected, atol=1e-5)


def test_final_norm_can_be_left_out():
    x, memory, _, _ = batch()
    with_norm = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=True), 2).eval()
    without = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=True), 2, final_norm=False).eval()
    without.load_state_dict(with_norm.state_dict(), strict=False)
    with torch.no_grad():
        raw = without(x, memory)
        assert torch.allclose(with_norm(x, memory), with_norm.norm(raw), atol=1e-6)
    assert isinstance(without.norm, nn.Identity)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (dict(norm_first=True), r"norm_first=False, theirs norm_first=True"),
        (dict(activation="gelu"), r"activation=gelu"),
        (dict(layer_norm_eps=1e-6), r"ours eps=1e-05, theirs eps=1e-06"),
        (dict(dim_feedforward=48), r"d_ff=64; .*dim_feedforward=48"),
        (dict(nhead=2), r"heads=4, .*nhead=2"),
    ],
)
def test_loading_a_different_layer_is_refused_by_name(change, pattern):
    settings = dict(d_model=D_MODEL, nhead=HEADS, dim_feedforward=D_FF, batch_first=True) | change
    with pytest.raises(ValueError, match=pattern):
        load_torch_decoder_layer(DecoderLayer(D_MODEL, HEADS, D_FF), nn.TransformerDecoderLayer(**settings))


# --- shapes, weights, memory ----------------------------------------------------------------------


@pytest.mark.parametrize(("target_len", "source_len"), [(5, 7), (7, 5), (1, 9), (6, 6)])
def test_source_and_target_may_differ_in_length(target_len, source_len):
    x, memory, source, target = batch(target_len=target_len, source_len=source_len)
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).eval()
    with torch.no_grad():
        out = layer(x, memory, padding_mask(source, PAD), target_mask(target, PAD), need_weights=True)
    assert out.shape == (3, target_len, D_MODEL)
    assert layer.self_attention_weights.shape == (3, HEADS, target_len, target_len)
    assert layer.cross_attention_weights.shape == (3, HEADS, target_len, source_len)


def test_cross_attention_gives_source_padding_zero_weight():
    x, memory, source, target = batch()
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).eval()
    with torch.no_grad():
        layer(x, memory, padding_mask(source, PAD), target_mask(target, PAD), need_weights=True)
    weights = layer.cross_attention_weights  # (batch, heads, target, source)
    assert torch.all(weights[1, :, :, 4:] == 0) and torch.all(weights[2, :, :, 1:] == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(3, HEADS, 5))


def test_weights_are_not_kept_unless_asked():
    x, memory, _, _ = batch()
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).eval()
    with torch.no_grad():
        layer(x, memory)
    assert layer.self_attention_weights is None and layer.cross_attention_weights is None


def test_every_layer_receives_the_same_memory():
    x, memory, _, _ = batch()
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), 3).eval()
    received = []
    for layer in decoder.layers:
        layer.cross_attn.register_forward_hook(lambda module, inputs, output: received.append(inputs[1:3]))
    with torch.no_grad():
        decoder(x, memory)
    assert len(received) == 3 and all(key is memory and value is memory for key, value in received)


def test_stack_layers_are_independent_copies():
    layer = DecoderLayer(D_MODEL, HEADS, D_FF)
    decoder = Decoder(layer, 2)
    with torch.no_grad():
        decoder.layers[0].cross_attn.key_proj.weight.add_(1.0)
    assert not torch.equal(decoder.layers[0].cross_attn.key_proj.weight, decoder.layers[1].cross_attn.key_proj.weight)
    assert all(p is not q for p, q in zip(layer.parameters(), decoder.layers[0].parameters()))


# --- the properties: causal, blind to padding, gradients ------------------------------------------


def test_a_future_target_position_cannot_change_earlier_outputs():
    x, memory, source, _target = batch()
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), 3).eval()
    changed = x.clone()
    changed[:, 3] += 1.0
    source_mask = padding_mask(source, PAD)
    with torch.no_grad():
        before = decoder(x, memory, source_mask, subsequent_mask(5))
        after = decoder(changed, memory, source_mask, subsequent_mask(5))
    assert torch.equal(before[:, :3], after[:, :3])
    assert not torch.allclose(before[:, 3:], after[:, 3:], atol=1e-4)


def test_source_padding_cannot_change_any_output():
    x, memory, source, target = batch()
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), 2).eval()
    garbage = memory.masked_fill((source == PAD).unsqueeze(-1), 5.0)
    masks = (padding_mask(source, PAD), target_mask(target, PAD))
    with torch.no_grad():
        assert torch.equal(decoder(x, memory, *masks), decoder(x, garbage, *masks))
        assert not torch.allclose(decoder(x, memory), decoder(x, garbage), atol=1e-4)  # unmasked, it leaks


def test_gradients_reach_every_parameter_and_the_memory():
    x, memory, source, target = batch()
    memory.requires_grad_(True)
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0), 2)
    decoder(x, memory, padding_mask(source, PAD), target_mask(target, PAD)).pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in decoder.parameters())
    assert memory.grad[0].abs().sum() > 0
    assert torch.all(memory.grad[2, 1:] == 0)  # sentence 3's source padding gets no gradient


# --- bad input --------------------------------------------------------------------------------------


def test_swapped_masks_are_refused_naming_the_shapes():
    # The self-attention, whose keys are the 5 target positions, receives the 7-key source mask.
    x, memory, source, target = batch()
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), 1)
    with pytest.raises(ValueError, match=re.escape("target_mask of shape (3, 1, 7)") + r".*\(3, 5, 5\)"):
        decoder(x, memory, target_mask(target, PAD), padding_mask(source, PAD))


@pytest.mark.parametrize("name", ["source_mask", "target_mask"])
def test_float_masks_are_refused(name):
    x, memory, source, target = batch()
    masks = {"source_mask": padding_mask(source, PAD), "target_mask": target_mask(target, PAD)}
    masks[name] = masks[name].float()
    with pytest.raises(ValueError, match=rf"{name} must be boolean.*torch.float32"):
        DecoderLayer(D_MODEL, HEADS, D_FF)(x, memory, **masks)


def test_memory_of_another_batch_is_refused_naming_both_shapes():
    x, memory, _, _ = batch()
    with pytest.raises(ValueError, match=re.escape("got x (3, 5, 32) and memory (2, 7, 32)")):
        DecoderLayer(D_MODEL, HEADS, D_FF)(x, memory[:2])


@pytest.mark.parametrize("num_layers", [0, -1])
def test_nonpositive_depth_is_refused(num_layers):
    with pytest.raises(ValueError, match=f"num_layers={num_layers}"):
        Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), num_layers)


# --- dtype and device ------------------------------------------------------------------------------


def test_dtype_follows_the_module():
    x, memory, source, target = batch()
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), 2).double().eval()
    with torch.no_grad():
        out = decoder(x.double(), memory.double(), padding_mask(source, PAD), target_mask(target, PAD))
    assert out.dtype == torch.float64


def test_device_follows_the_module():
    # "meta" stands in for a GPU: shapes and dtypes without data. A tensor created on the CPU inside the
    # layer would fail to combine with the others.
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), 2).to("meta").eval()
    x, memory = torch.zeros(2, 4, D_MODEL, device="meta"), torch.zeros(2, 6, D_MODEL, device="meta")
    source = torch.ones(2, 6, dtype=torch.long, device="meta")
    target = torch.ones(2, 4, dtype=torch.long, device="meta")
    out = decoder(x, memory, padding_mask(source, PAD), target_mask(target, PAD))
    assert out.device.type == "meta" and out.shape == (2, 4, D_MODEL)


def test_dropout_only_in_training():
    x, memory, _, _ = batch()
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.5), 1)
    decoder.eval()
    with torch.no_grad():
        assert torch.equal(decoder(x, memory), decoder(x, memory))
        decoder.train()
        assert not torch.allclose(decoder(x, memory), decoder(x, memory))


def test_the_decoder_checks_each_mask_by_name_with_chapter_6s_rule(monkeypatch):
    # The layer checks its two masks itself, by name, with the attention's own rule (the same function),
    # against the scores each attention computes; the attentions then check them again.
    from transformer_book import decoder, multihead

    assert decoder.check_attention_mask is multihead.check_attention_mask
    calls = []
    original = multihead.check_attention_mask

    def counted(mask, batch, queries, keys, name="mask", heads=None):
        calls.append((name, batch, queries, keys))
        return original(mask, batch, queries, keys, name, heads)

    monkeypatch.setattr(decoder, "check_attention_mask", counted)
    monkeypatch.setattr(multihead, "check_attention_mask", counted)
    x, memory, source, target = batch()
    DecoderLayer(D_MODEL, HEADS, D_FF)(x, memory, padding_mask(source, PAD), target_mask(target, PAD))
    assert calls == [
        ("target_mask", 3, 5, 5),
        ("source_mask", 3, 5, 7),  # the layer's, by name
        ("mask", 3, 5, 5),
        ("mask", 3, 5, 7),  # self-attention's (target keys), cross-attention's (source keys)
    ]


def test_a_batch_keys_source_mask_is_refused_with_the_fix():
    x, memory, source, _target = batch(target_len=3, source_len=3)  # batch 3 == target length 3
    with pytest.raises(ValueError, match=re.escape("got shape (3, 3)") + ".*" + re.escape("mask.unsqueeze(1)")):
        DecoderLayer(D_MODEL, HEADS, D_FF)(x, memory, source != PAD)


def test_non_tensor_and_wrong_dtype_inputs_are_refused_by_name():
    x, memory, _, _ = batch()
    layer = DecoderLayer(D_MODEL, HEADS, D_FF)
    with pytest.raises(TypeError, match=r"memory must be a torch\.Tensor; got list"):
        layer(x, memory.tolist())
    with pytest.raises(ValueError, match=r"x must be a floating-point tensor; got dtype torch\.int64"):
        layer(x.long(), memory)
    with pytest.raises(ValueError, match=r"has dtype torch\.float64, not torch\.float32 like the module's parameters"):
        layer(x.double(), memory.double())


@pytest.mark.parametrize(("batch_size", "target_len", "source_len"), [(0, 5, 7), (3, 0, 7), (3, 5, 0)])
def test_empty_batches_and_sequences_do_not_warn(batch_size, target_len, source_len):
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), 2).eval()
    x, memory = torch.randn(batch_size, target_len, D_MODEL), torch.randn(batch_size, source_len, D_MODEL)
    source_mask = torch.ones(batch_size, 1, source_len, dtype=torch.bool)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        output = decoder(x, memory, source_mask, subsequent_mask(target_len))
    assert output.shape == (batch_size, target_len, D_MODEL)


# --- what the encoder layer (chapter 5) and the decoder layer both promise -------------------------

LAYERS = {  # our layer, PyTorch's, the loader
    "encoder": (EncoderLayer, nn.TransformerEncoderLayer, load_torch_encoder_layer),
    "decoder": (DecoderLayer, nn.TransformerDecoderLayer, load_torch_decoder_layer),
}


@pytest.mark.parametrize(
    ("kind", "norm"),
    [("encoder", "norm1"), ("encoder", "norm2"), ("decoder", "norm1"), ("decoder", "norm2"), ("decoder", "norm3")],
)
def test_loading_checks_the_eps_of_every_norm(kind, norm):
    ours, their_class, load = LAYERS[kind]
    theirs = their_class(D_MODEL, HEADS, D_FF, batch_first=True)
    getattr(theirs, norm).eps = 1e-6  # one norm changed after construction
    with pytest.raises(ValueError, match=rf"eps differs in {norm}: ours eps=1e-05, theirs eps=1e-06"):
        load(ours(D_MODEL, HEADS, D_FF), theirs)


@pytest.mark.parametrize("kind", LAYERS)
@pytest.mark.parametrize("dropout", [-0.1, 1.0, 2.5, 3])
def test_dropout_outside_0_1_is_refused(kind, dropout):
    with pytest.raises(ValueError, match=rf"dropout must be a probability in \[0, 1\); got dropout={dropout}\b"):
        LAYERS[kind][0](D_MODEL, HEADS, D_FF, dropout=dropout)
