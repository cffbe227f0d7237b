"""Unit tests of transformer_book.kv_cache (chapter 10: the key/value cache and the position offset,
added to the classes of chapters 1, 3, 7 and 9)."""

import importlib.util
import inspect
import re

import pytest
import torch

import export_package
from transformer_book import (
    Decoder,
    DecoderLayer,
    EmbeddingWithPositions,
    MultiHeadAttention,
    PositionalEncoding,
    kv_cache,
    make_model,
    padding_mask,
    subsequent_mask,
)

D_MODEL, HEADS, D_FF = 32, 4, 64
PACKAGE_DIR = export_package.PACKAGE_DIR


def chapter_module(name: str):
    """A fresh copy of a generated module, as its chapter wrote it: its classes have not been given
    chapter 10's methods (the package's have)."""
    spec = importlib.util.spec_from_file_location(f"chapter_{name}", PACKAGE_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_inputs(batch=3, queries=6, keys=7, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, queries, D_MODEL, generator=generator), torch.randn(batch, keys, D_MODEL, generator=generator)


# --- the package's classes carry chapter 10's methods ------------------------------------------------


@pytest.mark.parametrize(
    "cls, method",
    [(MultiHeadAttention, "forward"), (DecoderLayer, "forward"), (Decoder, "forward"),
     (PositionalEncoding, "forward"), (EmbeddingWithPositions, "forward"),
     (make_model(5, 5, num_layers=1, d_model=8, d_ff=8, heads=2).__class__, "decode"),
     (make_model(5, 5, num_layers=1, d_model=8, d_ff=8, heads=2).__class__, "new_caches")],
)
def test_the_package_classes_have_chapter_10s_methods(cls, method):
    assert getattr(cls, method).__module__ == "transformer_book.kv_cache"


def test_add_to_class_attaches_under_the_function_name():
    class Plain:
        pass

    @kv_cache.add_to_class(Plain)
    def greet(self):
        return "hello"

    assert Plain().greet() == "hello" and greet(None) == "hello"


def test_without_a_cache_the_methods_compute_what_the_chapters_wrote():
    x, memory = random_inputs()
    source = torch.randint(3, 9, (3, 7), generator=torch.Generator().manual_seed(2))
    source[0, 5:] = 0
    source_mask, look_ahead = padding_mask(source, 0), subsequent_mask(6)

    chapter_3 = chapter_module("multihead").MultiHeadAttention(D_MODEL, HEADS).eval()
    assert "cache" not in inspect.signature(chapter_3.forward).parameters  # chapter 3's own method
    ours = MultiHeadAttention(D_MODEL, HEADS).eval()
    ours.load_state_dict(chapter_3.state_dict())
    for need_weights in (False, True):
        theirs_out, theirs_weights = chapter_3(x, memory, memory, source_mask, need_weights)
        out, weights = ours(x, memory, memory, source_mask, need_weights)
        assert torch.equal(out, theirs_out)
        assert (weights is None and theirs_weights is None) or torch.equal(weights, theirs_weights)

    chapter_7 = chapter_module("decoder")
    for norm_first in (False, True):
        theirs = chapter_7.Decoder(chapter_7.DecoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first), 2).eval()
        mine = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first), 2).eval()
        mine.load_state_dict(theirs.state_dict())
        assert torch.equal(mine(x, memory, source_mask, look_ahead), theirs(x, memory, source_mask, look_ahead))

    chapter_1 = chapter_module("positional").PositionalEncoding(D_MODEL, max_len=10)
    assert torch.equal(PositionalEncoding(D_MODEL, max_len=10)(x), chapter_1(x))

    chapter_9 = chapter_module("model")
    torch.manual_seed(0)
    theirs_model = chapter_9.make_model(13, 13, num_layers=2, d_model=D_MODEL, d_ff=D_FF, heads=HEADS).eval()
    mine_model = make_model(13, 13, num_layers=2, d_model=D_MODEL, d_ff=D_FF, heads=HEADS).eval()
    mine_model.load_state_dict(theirs_model.state_dict())
    target = torch.randint(3, 13, (3, 6), generator=torch.Generator().manual_seed(3))
    encoded = mine_model.encode(source, source_mask)
    assert torch.equal(mine_model.decode(encoded, source_mask, target, look_ahead),
                       theirs_model.decode(encoded, source_mask, target, look_ahead))


def test_no_chapter_before_10_exports_cache_or_offset_code():
    for notebook in export_package.chapter_notebooks():
        if int(notebook.name[:2]) >= 10:
            continue
        for module, body in export_package.exported_cells(notebook):
            found = re.findall(r"\bcaches?\b|\boffset\b", body)
            assert not found, f"{notebook.name} exports {found} in module {module}: chapter 10 introduces them"


# --- multi-head attention (chapter 3's class) -----------------------------------------------------


def test_self_attention_cache_reproduces_the_full_causal_computation():
    layer = MultiHeadAttention(D_MODEL, HEADS).eval()
    sequence, _ = random_inputs()
    causal = torch.ones(1, 6, 6, dtype=torch.bool).tril()
    full, _ = layer(sequence, sequence, sequence, mask=causal)
    cache = {}
    steps = [layer(sequence[:, t : t + 1], sequence[:, t : t + 1], sequence[:, t : t + 1], cache=cache)[0] for t in range(6)]
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


@pytest.mark.parametrize("offset, shown", [(13, r"positions 13\.\.16"), (-1, r"positions -1\.\.2")])
def test_an_offset_outside_the_table_names_the_positions(offset, shown):
    module = PositionalEncoding(8, max_len=16)
    with pytest.raises(ValueError, match=shown + r".*max_len=16"):
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
