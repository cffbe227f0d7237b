"""Unit tests of the key/value cache and the position offset (chapter 10), which the classes of chapters
1, 3, 7 and 9 take as optional arguments; and a check that the package replaces no method of any class
when it is imported: each class's code is the one in its own module."""

import importlib
import inspect
import pkgutil
import re
import sys

import pytest
import torch

import transformer_book
from transformer_book import (
    Decoder,
    DecoderLayer,
    EmbeddingWithPositions,
    MultiHeadAttention,
    PositionalEncoding,
    make_model,
    padding_mask,
    subsequent_mask,
)

D_MODEL, HEADS, D_FF = 32, 4, 64


def random_inputs(batch=3, queries=6, keys=7, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, queries, D_MODEL, generator=generator), torch.randn(
        batch, keys, D_MODEL, generator=generator
    )


# --- no method is replaced at import time ---------------------------------------------------------


def package_classes():
    """Every class defined in a module of the package, every module imported."""
    for info in pkgutil.iter_modules(transformer_book.__path__):
        importlib.import_module(f"transformer_book.{info.name}")
    found = {}
    for name, module in list(sys.modules.items()):
        if name == "transformer_book" or name.startswith("transformer_book."):
            for cls in vars(module).values():
                if inspect.isclass(cls) and cls.__module__ == name:
                    found[f"{name}.{cls.__qualname__}"] = cls
    return found


def test_the_package_has_classes_to_check():
    names = set(package_classes())
    assert {"transformer_book.multihead.MultiHeadAttention", "transformer_book.model.Transformer"} <= names


def test_every_method_is_defined_in_its_class_body():
    # A method attached after the class was made (setattr, d2l's add_to_class) keeps the module and
    # qualified name of where it was written: the class's file would not hold the code that runs.
    misplaced = []
    for where, cls in package_classes().items():
        for name, attribute in vars(cls).items():
            if isinstance(attribute, (staticmethod, classmethod)):
                attribute = attribute.__func__
            elif isinstance(attribute, property):
                attribute = attribute.fget
            if not inspect.isfunction(attribute):
                continue
            expected = (cls.__module__, f"{cls.__qualname__}.{attribute.__name__}")
            if (attribute.__module__, attribute.__qualname__) != expected:
                misplaced.append(f"{where}.{name} is {attribute.__module__}.{attribute.__qualname__}")
    assert not misplaced, misplaced


def test_a_method_attached_later_is_detected():
    class Plain:
        def forward(self):
            return 1

    def forward(self):
        return 2

    Plain.forward = forward
    assert Plain.forward.__qualname__ != f"{Plain.__qualname__}.forward"


@pytest.mark.parametrize(
    "method, argument, default",
    [
        (MultiHeadAttention.forward, "cache", None),
        (DecoderLayer.forward, "cache", None),
        (Decoder.forward, "caches", None),
        (PositionalEncoding.forward, "offset", 0),
        (EmbeddingWithPositions.forward, "offset", 0),
        (transformer_book.Transformer.decode, "caches", None),
        (transformer_book.Transformer.decode, "offset", 0),
    ],
)
def test_the_cache_is_an_argument_that_defaults_to_none(method, argument, default):
    assert inspect.signature(method).parameters[argument].default == default


# --- multi-head attention (chapter 3's class) -----------------------------------------------------


def test_self_attention_cache_reproduces_the_full_causal_computation():
    layer = MultiHeadAttention(D_MODEL, HEADS).eval()
    sequence, _ = random_inputs()
    causal = torch.ones(1, 6, 6, dtype=torch.bool).tril()
    full, _ = layer(sequence, sequence, sequence, mask=causal)
    cache = {}
    steps = [
        layer(sequence[:, t : t + 1], sequence[:, t : t + 1], sequence[:, t : t + 1], cache=cache)[0] for t in range(6)
    ]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
    assert cache["key"].shape == cache["value"].shape == (3, HEADS, 6, D_MODEL // HEADS)


def test_static_cache_projects_the_memory_once():
    layer = MultiHeadAttention(D_MODEL, HEADS).eval()
    query, memory = random_inputs(queries=1)
    projections = []
    layer.key_proj.register_forward_hook(lambda *_: projections.append("key"))
    cache = {"static": True}
    first, _ = layer(query, memory, memory, cache=cache)
    assert torch.allclose(first, layer(query, memory, memory)[0], atol=1e-6)
    assert projections == ["key", "key"]  # the cached call and the uncached one
    stored = cache["key"]
    again, _ = layer(query, torch.zeros_like(memory), torch.zeros_like(memory), cache=cache)  # memory ignored now
    assert cache["key"] is stored and torch.allclose(again, first, atol=1e-6)
    assert projections == ["key", "key"]  # not projected again


# --- the decoder layer and stack (chapter 7's classes) --------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
def test_step_by_step_with_caches_equals_one_pass(norm_first):
    x, memory = random_inputs()
    source = torch.randint(1, 9, (3, 7), generator=torch.Generator().manual_seed(0))
    source[1, 4:] = 0
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first), 2).eval()
    source_mask = padding_mask(source, 0)
    caches = [{"self": {}, "cross": {"static": True}} for _ in decoder.layers]
    with torch.no_grad():
        whole = decoder(x, memory, source_mask, subsequent_mask(6))
        steps = [decoder(x[:, i : i + 1], memory, source_mask, None, caches=caches) for i in range(6)]
    assert torch.allclose(torch.cat(steps, dim=1), whole, atol=1e-5)
    assert caches[0]["self"]["key"].shape == (3, HEADS, 6, D_MODEL // HEADS)
    assert caches[0]["cross"]["key"].shape == (3, HEADS, 7, D_MODEL // HEADS)


def test_a_step_mask_must_cover_the_cached_positions():
    x, memory = random_inputs()
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), 1).eval()
    caches = [{"self": {}, "cross": {"static": True}}]
    with torch.no_grad():
        decoder(x[:, :2], memory, None, subsequent_mask(2), caches=caches)
        decoder(x[:, 2:3], memory, None, torch.ones(1, 1, 3, dtype=torch.bool), caches=caches)  # 2 cached + 1
        with pytest.raises(ValueError, match=re.escape("target_mask of shape (1, 1, 3)") + r".*\(3, 1, 4\)"):
            decoder(x[:, 3:4], memory, None, torch.ones(1, 1, 3, dtype=torch.bool), caches=caches)


def test_wrong_number_of_caches_is_refused():
    x, memory = random_inputs()
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), 2)
    with pytest.raises(ValueError, match="2 layers, got 1 caches"):
        decoder(x, memory, caches=[{"self": {}, "cross": {"static": True}}])


# --- positions (chapters 1 and 9) and the model (chapter 9) ---------------------------------------


def test_offset_selects_later_positions():
    module = PositionalEncoding(16, max_len=50)
    zeros = torch.zeros(1, 4, 16)
    assert torch.equal(module(zeros, offset=6)[0], module(torch.zeros(1, 10, 16))[0, 6:10])


@pytest.mark.parametrize("offset", [13, -1])
def test_an_offset_outside_the_table_is_named(offset):
    module = PositionalEncoding(8, max_len=16)
    with pytest.raises(ValueError, match=rf"length 4 at offset {offset} does not fit .*max_len=16"):
        module(torch.zeros(1, 4, 8), offset=offset)
    module(torch.zeros(1, 4, 8), offset=12)  # positions 12..15: the last four rows


def test_embedding_with_positions_adds_the_table_at_an_offset():
    layer = EmbeddingWithPositions(10, 8, dropout=0.0, max_len=20)
    tokens = torch.tensor([[3, 4, 5]])
    scaled = layer.embeddings(tokens)
    assert torch.allclose(layer(tokens), scaled + layer.positional_encoding.table[:3])
    assert torch.allclose(layer(tokens, offset=5), scaled + layer.positional_encoding.table[5:8])
    bare = EmbeddingWithPositions(10, 8, dropout=0.0, positional=False)
    assert torch.equal(bare(tokens, offset=5), bare.embeddings(tokens))  # no positions, nothing to offset


def test_cached_decoder_states_equal_the_full_pass_at_every_step():
    torch.manual_seed(0)
    model = make_model(13, 13, num_layers=2, d_model=D_MODEL, d_ff=D_FF, heads=HEADS).eval()
    source = torch.randint(3, 13, (1, 7), generator=torch.Generator().manual_seed(1))
    target = torch.randint(3, 13, (1, 6), generator=torch.Generator().manual_seed(2))
    memory = model.encode(source)
    full = model.decode(memory, None, target, subsequent_mask(target.size(1)))
    caches = model.new_caches()
    assert len(caches) == 2 and caches[0] == {"self": {}, "cross": {"static": True}}
    for step in range(target.size(1)):
        one = model.decode(memory, None, target[:, step : step + 1], None, caches=caches, offset=step)
        assert torch.allclose(one[:, 0], full[:, step], atol=1e-5)
    assert caches[0]["self"]["key"].shape == (1, HEADS, target.size(1), D_MODEL // HEADS)
    # Without the offset every token is encoded as position 0: the states differ.
    caches = model.new_caches()
    at_zero = [model.decode(memory, None, target[:, step : step + 1], None, caches=caches) for step in range(6)]
    assert not torch.allclose(torch.cat(at_zero, dim=1), full, atol=1e-3)
