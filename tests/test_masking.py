"""Unit tests of transformer_book.masking (chapter 6: padding, look-ahead and target masks)."""

import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_book import (
    Embeddings,
    Encoder,
    EncoderLayer,
    MultiHeadAttention,
    PositionalEncoding,
    check_attention_mask,
    load_torch_attention,
    padding_mask,
    scaled_dot_product_attention,
    subsequent_mask,
    target_mask,
)

PAD = 0


def right_padded(lengths, max_len=6, seed=0):
    """Token ids (batch, max_len) in 1..9 with PAD after each sequence's length."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, 10, (len(lengths), max_len), generator=generator)
    return tokens.masked_fill(torch.arange(max_len) >= torch.tensor(lengths)[:, None], PAD)


# --- padding_mask ---------------------------------------------------------------------------------


def test_padding_mask_marks_real_tokens_with_a_query_axis():
    tokens = torch.tensor([[5, 3, PAD], [PAD, 2, 7]])
    mask = padding_mask(tokens, PAD)
    assert mask.shape == (2, 1, 3) and mask.dtype == torch.bool
    assert mask[:, 0].tolist() == [[True, True, False], [False, True, True]]


def test_padding_mask_uses_the_given_pad_id():
    tokens = torch.tensor([[0, 1, 2, 1]])
    assert padding_mask(tokens, pad_id=1)[0, 0].tolist() == [True, False, True, False]


@pytest.mark.parametrize("shape", [(6,), (2, 3, 4)])
def test_padding_mask_refuses_other_shapes_by_name(shape):
    with pytest.raises(ValueError, match=re.escape(f"(batch, seq); got shape {tuple(shape)}")):
        padding_mask(torch.zeros(shape, dtype=torch.long), PAD)


def test_padding_mask_refuses_float_tokens():
    with pytest.raises(ValueError, match="integer ids; got dtype torch.float32"):
        padding_mask(torch.zeros(2, 3), PAD)


def test_padding_mask_follows_the_device():
    # "meta" stands in for a GPU: a mask built on the CPU would fail to combine with the scores.
    assert padding_mask(torch.zeros(2, 3, dtype=torch.long, device="meta"), PAD).device.type == "meta"


# --- subsequent_mask ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 7])
def test_subsequent_mask_is_the_lower_triangle_with_diagonal(size):
    mask = subsequent_mask(size)
    assert mask.shape == (1, size, size) and mask.dtype == torch.bool
    for query in range(size):
        for key in range(size):
            assert mask[0, query, key].item() == (key <= query)


def test_subsequent_mask_matches_the_annotated_transformer_and_nn_transformer():
    annotated = torch.triu(torch.ones(1, 9, 9), diagonal=1).type(torch.uint8) == 0
    assert torch.equal(subsequent_mask(9), annotated)
    generated = nn.Transformer.generate_square_subsequent_mask(9)  # float: 0 allowed, -inf blocked
    assert torch.equal(subsequent_mask(9)[0], generated == 0)


@pytest.mark.parametrize("size, offset", [(1, 0), (3, 2), (4, 5)])
def test_subsequent_mask_with_an_offset_lets_query_i_see_positions_up_to_offset_plus_i(size, offset):
    mask = subsequent_mask(size, offset=offset)
    assert mask.shape == (1, size, offset + size)
    for query in range(size):
        assert mask[0, query].tolist() == [key <= offset + query for key in range(offset + size)]
    assert torch.equal(mask[:, :, offset:], subsequent_mask(size))  # the new positions: a triangle


@pytest.mark.parametrize("offset", [-1, 1.0, True])
def test_subsequent_mask_refuses_an_offset_that_is_not_a_count(offset):
    with pytest.raises(ValueError, match=f"offset must be an int >= 0; got offset={offset!r}"):
        subsequent_mask(3, offset=offset)


@pytest.mark.parametrize("size", [-1, -3])
def test_subsequent_mask_refuses_negative_sizes(size):
    with pytest.raises(ValueError, match=f"size={size}"):
        subsequent_mask(size)


def test_empty_sequences_get_empty_masks_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert subsequent_mask(0).shape == (1, 0, 0)
        assert target_mask(torch.zeros(2, 0, dtype=torch.long), 0).shape == (2, 0, 0)
        assert padding_mask(torch.zeros(0, 4, dtype=torch.long), 0).shape == (0, 1, 4)


def test_padding_mask_refuses_non_tensors():
    with pytest.raises(TypeError, match=r"tokens must be a torch\.Tensor; got list"):
        padding_mask([[1, 2, 0]], 0)


def test_subsequent_mask_is_built_on_the_requested_device():
    assert subsequent_mask(4, device="meta").device.type == "meta"


# --- target_mask ----------------------------------------------------------------------------------


def test_target_mask_is_padding_and_look_ahead():
    tokens = right_padded([4, 2, 6])
    mask = target_mask(tokens, PAD)
    assert mask.shape == (3, 6, 6)
    for row in range(3):
        for query in range(6):
            for key in range(6):
                expected = key <= query and tokens[row, key].item() != PAD
                assert mask[row, query, key].item() == expected


def test_target_mask_never_empties_a_row_under_right_padding():
    mask = target_mask(right_padded([1, 3, 6]), PAD)
    assert mask.any(-1).all()  # key 0 is real in every sentence


def test_target_mask_empties_rows_under_left_padding():
    tokens = torch.tensor([[PAD, PAD, 4, 5]])
    assert target_mask(tokens, PAD).any(-1)[0].tolist() == [False, False, True, True]


def test_target_mask_follows_the_device():
    assert target_mask(torch.zeros(2, 5, dtype=torch.long, device="meta"), PAD).device.type == "meta"


# --- check_attention_mask -------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 4, 5), (1, 4, 5), (2, 1, 5), (1, 1, 5), (2, 3, 4, 5), (2, 1, 1, 5)])
def test_check_accepts_masks_that_broadcast(shape):
    check_attention_mask(torch.ones(shape, dtype=torch.bool), 2, 4, 5, "source_mask")


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.long])
def test_check_refuses_non_boolean_masks_naming_the_dtype(dtype):
    with pytest.raises(ValueError, match=rf"target_mask must be boolean.*dtype {dtype}.*shape \(2, 4, 4\)"):
        check_attention_mask(torch.ones(2, 4, 4, dtype=dtype), 2, 4, 4, "target_mask")


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 4, 4), (2, 1, 4), (2, 3, 4, 4)])
def test_check_refuses_wrong_shapes_naming_both(shape):
    pattern = re.escape(f"source_mask of shape {tuple(shape)} does not broadcast to ") + r".* = \(2, (3, )?4, 5\)"
    with pytest.raises(ValueError, match=pattern):
        check_attention_mask(torch.ones(shape, dtype=torch.bool), 2, 4, 5, "source_mask")


@pytest.mark.parametrize("shape", [(2, 5), (4, 5), (5,), (1, 2, 1, 4, 5)])
def test_check_refuses_masks_without_3_or_4_axes_and_says_how_to_fix_them(shape):
    pattern = (
        re.escape("source_mask must have 3 or 4 axes")
        + ".*"
        + re.escape(f"got shape {tuple(shape)}. ")
        + ".*"
        + re.escape("source_mask.unsqueeze(1)")
    )
    with pytest.raises(ValueError, match=pattern):
        check_attention_mask(torch.ones(shape, dtype=torch.bool), 2, 4, 5, "source_mask")


def test_the_check_is_chapter_3s_and_the_encoder_refuses_a_batch_keys_mask():
    # One rule, in one place: masking re-exports chapter 3's check, and the encoder relies on it.
    from transformer_book import multihead

    assert check_attention_mask is multihead.check_attention_mask
    layer = EncoderLayer(16, heads=2, d_ff=32, dropout=0.0).eval()
    tokens = torch.tensor([[4, 5, 0, 0], [6, 7, 8, 0], [3, 0, 0, 0], [9, 9, 9, 9]])  # batch 4 == seq 4
    states = torch.randn(4, 4, 16)
    with pytest.raises(ValueError, match=re.escape("got shape (4, 4)") + ".*" + re.escape("mask.unsqueeze(1)")):
        layer(states, tokens != 0)
    assert layer(states, padding_mask(tokens, 0)).shape == (4, 4, 16)


# --- the conventions agree --------------------------------------------------------------------------


def test_our_mask_equals_torch_conventions():
    torch.manual_seed(0)
    tokens = right_padded([5, 3], max_len=5)
    x = torch.randn(2, 5, 16)
    ours = MultiHeadAttention(16, 2).eval()
    theirs = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    load_torch_attention(ours, theirs)
    mask = target_mask(tokens, PAD)
    with torch.no_grad():
        expected, _ = ours(x, x, x, mask)
        actual, _ = theirs(x, x, x, attn_mask=~subsequent_mask(5)[0], key_padding_mask=tokens == PAD)
        assert torch.allclose(expected, actual, atol=1e-6)
        float_mask = mask.float().log()  # 0 where allowed, -inf where blocked
        assert torch.allclose(
            F.scaled_dot_product_attention(x, x, x, attn_mask=float_mask),
            scaled_dot_product_attention(x, x, x, mask)[0],
            atol=1e-6,
        )


# --- the properties masks exist for -----------------------------------------------------------------


def small_stack(seed=0):
    torch.manual_seed(seed)
    embed = nn.Sequential(Embeddings(12, 32), PositionalEncoding(32, max_len=16))
    stack = Encoder(EncoderLayer(32, 4, 64, dropout=0.0), 2).eval()
    return embed, stack


@pytest.mark.parametrize("changed_position", [0, 3, 6])
def test_a_future_token_cannot_change_earlier_outputs(changed_position):
    embed, stack = small_stack()
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9, 2]])
    changed = tokens.clone()
    changed[0, changed_position] = 11
    mask = subsequent_mask(7)
    with torch.no_grad():
        difference = (stack(embed(changed), mask) - stack(embed(tokens), mask)).abs().amax(-1)[0]
    assert torch.all(difference[:changed_position] == 0)
    assert torch.all(difference[changed_position:] > 1e-4)  # and the change does reach the later ones


def test_without_the_look_ahead_mask_the_future_leaks():
    embed, stack = small_stack()
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9, 2]])
    changed = tokens.clone()
    changed[0, 6] = 11
    with torch.no_grad():
        difference = (stack(embed(changed)) - stack(embed(tokens))).abs().amax(-1)[0]
    assert torch.all(difference > 1e-4)


def test_padding_tokens_cannot_change_real_outputs():
    embed, stack = small_stack()
    tokens = right_padded([6, 3, 1], max_len=6)
    garbage = tokens.masked_fill(tokens == PAD, 7)  # anything at all where the padding was
    mask = padding_mask(tokens, PAD)
    real = tokens != PAD
    with torch.no_grad():
        clean, dirty = stack(embed(tokens), mask), stack(embed(garbage), mask)
        unmasked_clean, unmasked_dirty = stack(embed(tokens)), stack(embed(garbage))
    assert torch.equal(clean[real], dirty[real])
    assert not torch.allclose(unmasked_clean[real], unmasked_dirty[real], atol=1e-3)


@pytest.mark.parametrize("need_weights", [False, True])
def test_a_row_with_nothing_to_attend_to_gives_zero_weights_not_nan(need_weights):
    torch.manual_seed(0)
    tokens = torch.tensor([[PAD, PAD, 4, 5, 6]])  # left padding: queries 0 and 1 see only padding
    x = torch.randn(1, 5, 16)
    attention = MultiHeadAttention(16, 2).eval()
    mask = target_mask(tokens, PAD)
    with torch.no_grad():
        output, weights = attention(x, x, x, mask, need_weights)
        assert not torch.isnan(output).any()
        # An empty row reads nothing: its output is the output projection of a zero vector, its bias.
        assert torch.allclose(output[0, :2], attention.output_proj.bias.expand(2, -1), atol=1e-6)
        if need_weights:
            assert torch.all(weights[0, :, :2] == 0)
            assert torch.allclose(weights[0, :, 2:].sum(-1), torch.ones(2, 3))
        # and two layers later, nothing has spread
        again, _ = attention(output, output, output, mask, need_weights)
        assert not torch.isnan(again).any()
