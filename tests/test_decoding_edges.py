"""Issue 25: the decoders and loaders at their edges. Every source mask greedy decoding takes, beam
search takes; a batch of no sources is refused the same way by every decoder; the loaders check what
they copy (every layer norm's eps, the final norms, the class of what they are given); dropout given as
a probability is refused by name; the decoder's mask errors say which mask."""

import re
import warnings

import pytest
import torch
from torch import nn

from test_model import END, PAD, START, small_model  # chapter 9's small model, made in training mode
from transformer_book import (
    Decoder,
    DecoderLayer,
    EncoderLayer,
    beam_search,
    greedy_decode,
    load_torch_decoder_layer,
    load_torch_transformer,
    padding_mask,
    sample_decode,
    scaled_dot_product_attention,
    subsequent_mask,
)


def two_sources(vocab=13, length=5):
    return torch.randint(3, vocab, (2, length), generator=torch.Generator().manual_seed(4))


# --- beam search takes every source mask greedy decoding takes ------------------------------------


def one_mask_for_both(shape):
    """A mask shared by both sources (its batch axis is 1), blocking the last source position."""
    mask = torch.ones(shape, dtype=torch.bool)
    if shape[-1] > 1:
        mask[..., -1] = False
    return mask


# (batch or 1, 1, source or 1) and (batch or 1, heads or 1, 1, source or 1)
BROADCAST_SHAPES = [(1, 1, 5), (1, 1, 1), (1, 1, 1, 5), (1, 4, 1, 5), (2, 1, 1, 5)]


@pytest.mark.parametrize("shape", BROADCAST_SHAPES)
@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_search_takes_a_broadcast_mask_and_decodes_each_source_as_alone(shape, use_cache):
    model, sources = small_model().eval(), two_sources()
    mask = one_mask_for_both(shape)
    greedy_decode(model, sources, mask, START, 6, use_cache=use_cache)  # greedy takes it
    tokens, scores = beam_search(model, sources, mask, START, 6, beam_size=3, end_id=END, use_cache=use_cache)
    for row in range(2):
        alone_mask = mask if mask.size(0) == 1 else mask[row : row + 1]
        alone, alone_score = beam_search(
            model, sources[row : row + 1], alone_mask, START, 6, beam_size=3, end_id=END, use_cache=use_cache
        )
        assert torch.equal(tokens[row, : alone.size(1)], alone[0])
        assert (tokens[row, alone.size(1) :] == END).all()  # padded after its end, as the batch ran longer
        assert scores[row].item() == pytest.approx(alone_score.item(), abs=1e-5)


def test_a_broadcast_mask_gives_what_the_mask_repeated_per_source_gives():
    model, sources = small_model().eval(), two_sources()
    mask = one_mask_for_both((1, 1, 5))
    shared = beam_search(model, sources, mask, START, 6, beam_size=3)
    repeated = beam_search(model, sources, mask.expand(2, 1, 5), START, 6, beam_size=3)
    assert torch.equal(shared[0], repeated[0]) and torch.equal(shared[1], repeated[1])


def test_a_mask_for_another_batch_is_still_refused_by_beam_search():
    model, sources = small_model().eval(), two_sources()
    with pytest.raises(ValueError, match=re.escape("(3, 1, 5)")):
        beam_search(model, sources, torch.ones(3, 1, 5, dtype=torch.bool), START, 4)


# --- a batch of no sources: refused the same way by every decoder ---------------------------------


DECODERS = {
    "greedy_decode": lambda model, source, mask, **kw: greedy_decode(model, source, mask, START, 4, **kw),
    "greedy_decode without the cache": lambda model, source, mask, **kw: greedy_decode(
        model, source, mask, START, 4, use_cache=False, **kw
    ),
    "beam_search": lambda model, source, mask, **kw: beam_search(model, source, mask, START, 4, **kw),
    "sample_decode": lambda model, source, mask, **kw: sample_decode(model, source, mask, START, 4, **kw),
}


@pytest.mark.parametrize("decoder", list(DECODERS))
@pytest.mark.parametrize("end_id", [None, END])
@pytest.mark.parametrize("with_mask", [False, True])
def test_no_sources_are_refused_naming_the_shape(decoder, end_id, with_mask):
    model, source = small_model().eval(), two_sources()[:0]  # (0, 5)
    mask = padding_mask(source, PAD) if with_mask else None
    message = re.escape("source holds no sequences (shape (0, 5)); decode at least one")
    with pytest.raises(ValueError, match=message):
        DECODERS[decoder](model, source, mask, end_id=end_id)


@pytest.mark.parametrize("decoder", list(DECODERS))
def test_a_source_without_a_batch_axis_is_refused(decoder):
    model = small_model().eval()
    with pytest.raises(ValueError, match=re.escape("source must be token ids (batch, source); got shape (5,)")):
        DECODERS[decoder](model, two_sources()[0], None)


# --- load_torch_transformer checks every layer norm it copies -------------------------------------


def torch_transformer(**options):
    torch.manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nn.Transformer(32, 4, 2, 2, 64, dropout=0.0, batch_first=True, **options)


NORMS = {  # where the norm is in nn.Transformer, and how the refusal names it
    "encoder final norm": (lambda t: t.encoder.norm, "in the encoder final norm"),
    "decoder final norm": (lambda t: t.decoder.norm, "in the decoder final norm"),
    "encoder layer 0 norm1": (lambda t: t.encoder.layers[0].norm1, "encoder layer 0: layer-norm eps differs in norm1"),
    "encoder layer 1 norm2": (lambda t: t.encoder.layers[1].norm2, "encoder layer 1: layer-norm eps differs in norm2"),
    "decoder layer 0 norm2": (lambda t: t.decoder.layers[0].norm2, "decoder layer 0: layer-norm eps differs in norm2"),
    "decoder layer 1 norm3": (lambda t: t.decoder.layers[1].norm3, "decoder layer 1: layer-norm eps differs in norm3"),
}


@pytest.mark.parametrize("norm", list(NORMS))
def test_a_different_eps_in_any_norm_is_refused_by_name_and_nothing_is_copied(norm):
    theirs = torch_transformer()
    where, named = NORMS[norm]
    where(theirs).eps = 1e-3
    ours = small_model(final_norm=True)
    before = {name: value.clone() for name, value in ours.state_dict().items()}
    with pytest.raises(ValueError, match=re.escape(named) + r": ours eps=1e-05, theirs eps=0\.001"):
        load_torch_transformer(ours, theirs)
    assert all(torch.equal(value, before[name]) for name, value in ours.state_dict().items())


def test_a_missing_decoder_final_norm_is_named_not_an_attribute_error():
    ours = small_model(final_norm=True)
    ours.decoder.norm = nn.Identity()
    with pytest.raises(ValueError, match=re.escape("decoder final norm (ours False, theirs True)")):
        load_torch_transformer(ours, torch_transformer())


def test_stacks_without_final_norms_on_both_sides_load_and_agree():
    theirs = torch_transformer()
    theirs.encoder.norm = theirs.decoder.norm = None
    ours = load_torch_transformer(small_model(final_norm=False, dropout=0.0).eval(), theirs)
    source, target = two_sources(), two_sources(length=4)
    look_ahead = subsequent_mask(4)
    with torch.no_grad():
        mine = ours(source, target, None, look_ahead)
        their = theirs(ours.source_embed(source), ours.target_embed(target), tgt_mask=~look_ahead[0])
    assert torch.allclose(mine, their, atol=1e-5)


def test_loading_something_else_than_nn_transformer_names_the_class():
    with pytest.raises(TypeError, match=r"nn\.Transformer.*got TransformerEncoder"):
        load_torch_transformer(small_model(final_norm=True), torch_transformer().encoder)


# --- load_torch_decoder_layer names the class it expects ------------------------------------------


def test_an_encoder_layer_given_to_the_decoder_loader_names_the_expected_class():
    theirs = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    with pytest.raises(TypeError, match=r"nn\.TransformerDecoderLayer.*got TransformerEncoderLayer"):
        load_torch_decoder_layer(DecoderLayer(32, 4, 64), theirs)


def test_our_encoder_layer_given_to_the_decoder_loader_names_the_expected_class():
    theirs = nn.TransformerDecoderLayer(32, 4, 64, batch_first=True)
    with pytest.raises(TypeError, match=r"DecoderLayer.*got EncoderLayer"):
        load_torch_decoder_layer(EncoderLayer(32, 4, 64), theirs)


# --- scaled_dot_product_attention's dropout is a module -------------------------------------------


@pytest.mark.parametrize("dropout", [0.1, 0, "0.1"])
def test_dropout_given_as_a_probability_is_refused_saying_it_takes_a_module(dropout):
    query = torch.randn(2, 3, 8)
    pattern = r"dropout takes a module such as nn\.Dropout\(0\.1\) \(or None\); got " + type(dropout).__name__
    with pytest.raises(TypeError, match=pattern):
        scaled_dot_product_attention(query, query, query, dropout=dropout)


def test_dropout_as_a_module_or_none_still_works():
    query = torch.randn(2, 3, 8)
    plain, _ = scaled_dot_product_attention(query, query, query)
    identity, _ = scaled_dot_product_attention(query, query, query, dropout=nn.Dropout(0.5).eval())
    assert torch.equal(plain, identity)


# --- the decoder's mask errors say which mask -----------------------------------------------------


def decoder_inputs(batch=3, target=5, source=7):
    generator = torch.Generator().manual_seed(0)
    return torch.randn(batch, target, 32, generator=generator), torch.randn(batch, source, 32, generator=generator)


GOOD_MASKS = {"source_mask": torch.ones(3, 1, 7, dtype=torch.bool), "target_mask": subsequent_mask(5)}
BAD_MASKS = [
    (
        "source_mask",
        torch.ones(3, 1, 5, dtype=torch.bool),
        r"source_mask of shape \(3, 1, 5\) does not broadcast.*\(3, 5, 7\)",
    ),
    (
        "target_mask",
        torch.ones(3, 1, 7, dtype=torch.bool),
        r"target_mask of shape \(3, 1, 7\) does not broadcast.*\(3, 5, 5\)",
    ),
    ("source_mask", torch.ones(3, 1, 7), r"source_mask must be boolean.*torch\.float32"),
    ("target_mask", subsequent_mask(5).float(), r"target_mask must be boolean.*torch\.float32"),
    (
        "source_mask",
        torch.ones(3, 7, dtype=torch.bool),
        r"source_mask must have 3 or 4 axes.*source_mask\.unsqueeze\(1\)",
    ),
    ("target_mask", torch.ones(3, 2, 5, 5, dtype=torch.bool), r"target_mask of shape \(3, 2, 5, 5\).*\(3, 4, 5, 5\)"),
]


@pytest.mark.parametrize(("name", "mask", "pattern"), BAD_MASKS)
@pytest.mark.parametrize("stack", [False, True])
def test_decoder_mask_errors_name_the_mask(name, mask, pattern, stack):
    x, memory = decoder_inputs()
    layer = DecoderLayer(32, 4, 64).eval()
    module = Decoder(layer, 2).eval() if stack else layer
    masks = GOOD_MASKS | {name: mask}
    module(x, memory, **GOOD_MASKS)  # the good masks pass
    with pytest.raises(ValueError, match=pattern):
        module(x, memory, **masks)
