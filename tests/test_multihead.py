"""Unit tests of transformer_book.multihead (chapter 3)."""

import warnings

import pytest
import torch
from torch import nn

from transformer_book import MultiHeadAttention, load_torch_attention, scaled_dot_product_attention


def pair(d_model=32, heads=4, bias=True, seed=0):
    """A random nn.MultiheadAttention and ours with the same weights, both in evaluation mode."""
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(d_model, heads, bias=bias, batch_first=True).eval()
    ours = load_torch_attention(MultiHeadAttention(d_model, heads, bias=bias), theirs).eval()
    return ours, theirs


def inputs(batch=3, queries=5, keys=7, d_model=32, seed=1):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(batch, queries, d_model, generator=generator)
    memory = torch.randn(batch, keys, d_model, generator=generator)
    return query, memory


def test_shapes_self_and_cross_attention():
    layer = MultiHeadAttention(32, 4).eval()
    query, memory = inputs()
    output, weights = layer(query, query, query)
    assert output.shape == (3, 5, 32) and weights is None
    output, weights = layer(query, memory, memory, need_weights=True)
    assert output.shape == (3, 5, 32) and weights.shape == (3, 4, 5, 7)


def test_split_heads_puts_feature_block_i_in_head_i_and_merge_inverts_it():
    layer = MultiHeadAttention(12, 3)
    projected = torch.arange(2 * 5 * 12, dtype=torch.float32).view(2, 5, 12)
    heads = layer.split_heads(projected)
    assert heads.shape == (2, 3, 5, 4)
    for head in range(3):
        assert torch.equal(heads[:, head], projected[..., head * 4 : (head + 1) * 4])
    assert torch.equal(layer.merge_heads(heads), projected)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("heads", [1, 4, 8])
def test_self_attention_matches_torch(heads, bias):
    ours, theirs = pair(heads=heads, bias=bias)
    query, _ = inputs()
    expected, expected_weights = theirs(query, query, query, average_attn_weights=False)
    output, weights = ours(query, query, query, need_weights=True)
    assert torch.allclose(output, expected, atol=1e-5)
    assert torch.allclose(weights, expected_weights, atol=1e-6)
    assert torch.allclose(ours(query, query, query)[0], expected, atol=1e-5)


def test_key_padding_mask_matches_torch_after_inversion():
    ours, theirs = pair()
    query, memory = inputs()
    key_padding = torch.zeros(3, 7, dtype=torch.bool)  # PyTorch: True = padding
    key_padding[1, 4:] = True
    key_padding[2, 6:] = True
    expected, expected_average = theirs(query, memory, memory, key_padding_mask=key_padding)
    for need_weights in (True, False):
        output, _ = ours(query, memory, memory, mask=~key_padding.unsqueeze(1), need_weights=need_weights)
        assert torch.allclose(output, expected, atol=1e-5)
    _, weights = ours(query, memory, memory, mask=~key_padding.unsqueeze(1), need_weights=True)
    assert torch.allclose(weights.mean(dim=1), expected_average, atol=1e-6)
    assert (weights[1, :, :, 4:] == 0).all()


def test_attention_mask_and_both_masks_match_torch():
    ours, theirs = pair()
    query, _ = inputs(queries=6)
    future = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)  # PyTorch: True = not allowed
    key_padding = torch.zeros(3, 6, dtype=torch.bool)
    key_padding[0, 5:] = True
    expected, _ = theirs(query, query, query, attn_mask=future)
    assert torch.allclose(ours(query, query, query, mask=~future.unsqueeze(0))[0], expected, atol=1e-5)
    expected, expected_weights = theirs(
        query, query, query, attn_mask=future, key_padding_mask=key_padding, average_attn_weights=False
    )
    our_mask = ~future & ~key_padding[:, None, :]  # (batch, queries, keys)
    output, weights = ours(query, query, query, mask=our_mask, need_weights=True)
    assert torch.allclose(output, expected, atol=1e-5)
    assert torch.allclose(weights, expected_weights, atol=1e-6)


@pytest.mark.parametrize("mask_shape", [(1, 1, 7), (1, 5, 7), (3, 1, 7), (3, 5, 7), (3, 4, 5, 7), (3, 1, 1, 7)])
def test_explicit_and_fused_paths_agree_for_every_mask_layout(mask_shape):
    layer = MultiHeadAttention(32, 4).eval()
    query, memory = inputs()
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(2)) > 0.3
    explicit, _ = layer(query, memory, memory, mask=mask, need_weights=True)
    fused, _ = layer(query, memory, memory, mask=mask)
    assert torch.allclose(explicit, fused, atol=1e-5)


def test_fully_masked_query_gives_the_output_bias_on_both_paths():
    layer = MultiHeadAttention(32, 4).eval()
    query, memory = inputs()
    mask = torch.ones(3, 5, 7, dtype=torch.bool)
    mask[2, 1] = False  # query 1 of sequence 2 may attend to nothing: attended values are zero
    for need_weights in (True, False):
        output, _ = layer(query, memory, memory, mask=mask, need_weights=need_weights)
        assert torch.isfinite(output).all()
        assert torch.allclose(output[2, 1], layer.output_proj.bias)


def test_gradients_reach_every_parameter_and_the_inputs_on_both_paths():
    for need_weights in (True, False):
        layer = MultiHeadAttention(32, 4)
        query, memory = inputs()
        query.requires_grad_(True)
        memory.requires_grad_(True)
        output, _ = layer(query, memory, memory, mask=torch.ones(3, 1, 7, dtype=torch.bool), need_weights=need_weights)
        (output * torch.randn_like(output)).sum().backward()
        for name, parameter in layer.named_parameters():
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
        assert query.grad.abs().sum() > 0 and memory.grad.abs().sum() > 0


def test_dropout_only_in_training_on_both_paths():
    layer = MultiHeadAttention(32, 4, dropout=0.5)
    query, _ = inputs()
    layer.eval()
    for need_weights in (True, False):
        assert torch.equal(
            layer(query, query, query, need_weights=need_weights)[0],
            layer(query, query, query, need_weights=need_weights)[0],
        )
    layer.train()
    for need_weights in (True, False):
        first = layer(query, query, query, need_weights=need_weights)[0]
        assert not torch.allclose(first, layer(query, query, query, need_weights=need_weights)[0])
    _, weights = layer(query, query, query, need_weights=True)
    assert (weights == 0).float().mean() > 0.3


def test_scale_is_used_on_both_paths():
    layer = MultiHeadAttention(32, 4, scale=1.0).eval()
    query, _ = inputs()
    _, weights = layer(query, query, query, need_weights=True)
    queries, keys = layer.split_heads(layer.query_proj(query)), layer.split_heads(layer.key_proj(query))
    assert torch.allclose(weights, torch.softmax(queries @ keys.transpose(-2, -1), dim=-1), atol=1e-6)
    assert torch.allclose(layer(query, query, query)[0], layer(query, query, query, need_weights=True)[0], atol=1e-5)
    unscaled = MultiHeadAttention(32, 4).eval()
    unscaled.load_state_dict(layer.state_dict())
    assert not torch.allclose(unscaled(query, query, query)[0], layer(query, query, query)[0], atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_dtype_follows_the_module_and_input(dtype):
    layer = MultiHeadAttention(32, 4).to(dtype).eval()
    query, _ = inputs()
    for need_weights in (True, False):
        output, weights = layer(query.to(dtype), query.to(dtype), query.to(dtype), need_weights=need_weights)
        assert output.dtype == dtype
        assert weights is None or weights.dtype == dtype


def test_device_follows_the_module():
    # The "meta" device stands in for a GPU: a tensor made on the CPU inside forward would fail.
    layer = MultiHeadAttention(32, 4).to("meta")
    query = torch.empty(2, 5, 32, device="meta")
    mask = torch.ones(2, 1, 5, dtype=torch.bool, device="meta")
    for need_weights in (True, False):
        output, _ = layer(query, query, query, mask=mask, need_weights=need_weights)
        assert output.device.type == "meta" and output.shape == (2, 5, 32)


@pytest.mark.parametrize(("d_model", "heads"), [(100, 8), (30, 4), (32, 0), (0, 4)])
def test_widths_that_do_not_split_are_named(d_model, heads):
    with pytest.raises(ValueError, match=rf"d_model={d_model}, heads={heads}"):
        MultiHeadAttention(d_model, heads)


def test_mismatched_feature_sizes_are_named():
    layer = MultiHeadAttention(32, 4)
    query, memory = inputs()
    with pytest.raises(ValueError, match=r"key must have shape \(batch, seq, d_model=32\); got \(3, 7, 24\)"):
        layer(query, memory[..., :24], memory)
    with pytest.raises(ValueError, match=r"query must have shape .*d_model=32.*got \(3, 5, 16\)"):
        layer(query[..., :16], memory, memory)
    with pytest.raises(ValueError, match=r"value .*got \(7, 32\)"):
        layer(query, memory, memory[0])


def test_mismatched_batches_and_key_value_lengths_are_named():
    layer = MultiHeadAttention(32, 4)
    query, memory = inputs()
    with pytest.raises(ValueError, match=r"same batch size; got 3, 2 and 2"):
        layer(query, memory[:2], memory[:2])
    with pytest.raises(ValueError, match=r"7 keys and 6 values"):
        layer(query, memory, memory[:, :6])


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize(
    ("shape", "scores"),
    [
        ((3, 5, 6), r"\(3, 5, 7\)"),
        ((2, 1, 7), r"\(3, 5, 7\)"),
        ((3, 2, 5, 7), r"\(3, 4, 5, 7\)"),
        ((1, 1, 5, 8), r"\(3, 4, 5, 7\)"),
    ],
)
def test_masks_that_do_not_broadcast_are_named(shape, scores, need_weights):
    layer = MultiHeadAttention(32, 4)
    query, memory = inputs()
    pattern = r"mask of shape \(" + ", ".join(map(str, shape)) + r"\).*" + scores
    with pytest.raises(ValueError, match=pattern):
        layer(query, memory, memory, mask=torch.ones(shape, dtype=torch.bool), need_weights=need_weights)


def test_non_boolean_masks_are_refused():
    layer = MultiHeadAttention(32, 4)
    query, _ = inputs()
    with pytest.raises(ValueError, match=r"boolean.*torch\.float32"):
        layer(query, query, query, mask=torch.zeros(3, 1, 5))


def test_load_refuses_layers_it_cannot_copy():
    with pytest.raises(ValueError, match=r"ours d_model=32, heads=4; theirs embed_dim=32, num_heads=8"):
        load_torch_attention(MultiHeadAttention(32, 4), nn.MultiheadAttention(32, 8))
    with pytest.raises(ValueError, match=r"kdim=16, vdim=16"):
        load_torch_attention(MultiHeadAttention(32, 4), nn.MultiheadAttention(32, 4, kdim=16, vdim=16))
    with pytest.raises(ValueError, match=r"add_bias_kv=True"):
        load_torch_attention(MultiHeadAttention(32, 4), nn.MultiheadAttention(32, 4, add_bias_kv=True))
    with pytest.raises(ValueError, match=r"ours bias=True, theirs bias=False"):
        load_torch_attention(MultiHeadAttention(32, 4), nn.MultiheadAttention(32, 4, bias=False))


def test_heads_are_chapter_2_attention_on_slices_of_the_projections():
    layer = MultiHeadAttention(32, 4).eval()
    query, memory = inputs()
    output, weights = layer(query, memory, memory, need_weights=True)
    q, k, v = layer.query_proj(query), layer.key_proj(memory), layer.value_proj(memory)
    heads = [
        scaled_dot_product_attention(
            q[..., i * 8 : (i + 1) * 8], k[..., i * 8 : (i + 1) * 8], v[..., i * 8 : (i + 1) * 8]
        )
        for i in range(4)
    ]
    for i, (_, head_weights) in enumerate(heads):
        assert torch.allclose(weights[:, i], head_weights, atol=1e-6)
    assert torch.allclose(output, layer.output_proj(torch.cat([z for z, _ in heads], dim=-1)), atol=1e-5)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("shape", [(7,), (5, 7), (3, 7), (1, 3, 1, 5, 7)])
def test_masks_need_3_or_4_axes(shape, need_weights):
    layer = MultiHeadAttention(32, 4)
    query, memory = inputs()
    pattern = (
        r"mask must have 3 or 4 axes.*here \(3, 1, 7\), \(3, 5, 7\) or \(3, 4, 5, 7\); got shape \("
        + ", ".join(map(str, shape))
        + r",?\)\. .*mask\.unsqueeze\(1\)"
    )
    with pytest.raises(ValueError, match=pattern):
        layer(query, memory, memory, mask=torch.ones(shape, dtype=torch.bool), need_weights=need_weights)


def test_a_batch_keys_padding_mask_is_refused_even_when_batch_equals_queries():
    # With batch == queries, broadcasting would read a (batch, keys) mask as (queries, keys), silently.
    layer = MultiHeadAttention(32, 4).eval()
    query, memory = inputs(batch=5, queries=5)
    padding = torch.ones(5, 7, dtype=torch.bool)
    padding[1, 4:] = False
    with pytest.raises(ValueError, match=r"got shape \(5, 7\).*mask\.unsqueeze\(1\)"):
        layer(query, memory, memory, mask=padding)
    fixed, _ = layer(query, memory, memory, mask=padding.unsqueeze(1))
    misread, _ = layer(query, memory, memory, mask=padding.unsqueeze(0))  # what broadcasting would do
    assert not torch.allclose(fixed, misread, atol=1e-4)


def test_a_4_axis_mask_must_match_the_number_of_heads():
    layer = MultiHeadAttention(32, 4)
    query, memory = inputs()
    with pytest.raises(ValueError, match=r"mask of shape \(3, 2, 5, 7\).*\(3, 4, 5, 7\)"):
        layer(query, memory, memory, mask=torch.ones(3, 2, 5, 7, dtype=torch.bool))


def test_non_tensor_arguments_are_refused_by_name():
    layer = MultiHeadAttention(32, 4)
    query, memory = inputs()
    with pytest.raises(TypeError, match=r"query must be a torch\.Tensor; got list"):
        layer(query.tolist(), memory, memory)
    with pytest.raises(TypeError, match=r"value must be a torch\.Tensor; got ndarray"):
        layer(query, memory, memory.numpy())
    with pytest.raises(TypeError, match=r"mask must be a torch\.Tensor; got list"):
        layer(query, memory, memory, mask=[[[True] * 7]])


def test_inputs_of_another_dtype_than_the_parameters_are_refused():
    layer = MultiHeadAttention(32, 4)
    query, memory = inputs()
    with pytest.raises(
        ValueError, match=r"key has dtype torch\.float64, not torch\.float32 like the module's parameters"
    ):
        layer(query, memory.double(), memory.double())
    with pytest.raises(ValueError, match=r"query must be a floating-point tensor; got dtype torch\.int64"):
        layer(query.long(), memory, memory)


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 1.5, float("nan")])
def test_dropout_outside_0_1_is_refused(dropout):
    with pytest.raises(ValueError, match=rf"dropout must be a probability in \[0, 1\); got dropout={dropout}"):
        MultiHeadAttention(32, 4, dropout=dropout)
    with pytest.raises(TypeError, match=r"dropout must be a number"):
        MultiHeadAttention(32, 4, dropout="0.1")


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize(("batch", "queries", "keys"), [(0, 5, 7), (3, 0, 7), (3, 5, 0), (0, 0, 0)])
def test_empty_batches_and_sequences_do_not_warn(batch, queries, keys, need_weights):
    layer = MultiHeadAttention(32, 4).eval()
    query, memory = inputs(batch=batch, queries=queries, keys=keys)
    mask = torch.ones(batch, 1, keys, dtype=torch.bool)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        output, _ = layer(query, memory, memory, mask=mask, need_weights=need_weights)
    assert output.shape == (batch, queries, 32)
