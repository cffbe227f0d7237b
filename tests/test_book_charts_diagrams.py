"""Unit tests of the diagram helpers: valid specs, highlights, chapter links, text alternatives, shapes."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest
import yaml

import book_charts
from book_charts import BASE, ModelConfig, architecture, parameter_counts
from book_charts.architecture import CHAPTERS, resolve_highlight

REPO_ROOT = Path(__file__).resolve().parents[1]
EXPECTED_CHAPTERS = [
    "01_positional_encoding",
    "02_scaled_dot_product_attention",
    "03_multi_head_attention",
    "04_add_and_norm",
    "05_feed_forward",
    "06_masking",
    "07_cross_attention",
    "08_linear_and_softmax",
    "09_full_transformer",
    "10_decoding",
    "11_inside_the_model",
    "12_search_matters",
    "13_tokens_from_text",
    "14_translating",
    "15_writing_poems",
    "16_modern_decoder",
    "17_past_one_machine",
    "18_what_training_costs",
    "19_instructions_and_lora",
    "20_preferences_and_rewards",
]
SMALL = ModelConfig(
    d_model=64, heads=4, d_ff=256, num_layers=2, source_vocab=50, target_vocab=50, batch=3, source_len=7, target_len=5
)
MECHANISMS = [
    book_charts.attention_diagram,
    book_charts.multi_head_diagram,
    book_charts.add_and_norm_diagram,
    book_charts.feed_forward_diagram,
    book_charts.cross_attention_diagram,
    book_charts.output_layer_diagram,
    book_charts.kv_cache_diagram,
]


def toc_pages() -> set[str]:
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return {entry["file"].removeprefix("book/") for part in toc["parts"] for entry in part["chapters"]}


def layers(spec: dict) -> list[dict]:
    """Every unit (non-composite) view of a spec, depth first."""
    found = []
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for child in spec.get(key, []):
            found += layers(child)
    if "mark" in spec:
        found.append(spec)
    return found


def rows(spec: dict) -> list[dict]:
    """All inline data rows of a spec (Altair moves them into top-level datasets)."""
    return [row for dataset in spec.get("datasets", {}).values() for row in dataset]


def hrefs(spec: dict) -> set[str]:
    return {row["href"] for row in rows(spec) if row.get("href")}


def test_the_book_lists_the_expected_chapters_in_order():
    assert [CHAPTERS[number] for number in sorted(CHAPTERS)] == EXPECTED_CHAPTERS


@functools.cache
def _architecture_spec(highlight) -> str:
    return json.dumps(architecture(highlight).to_dict())  # to_dict() validates against the Vega-Lite schema


def architecture_spec(highlight: int | str | None = None) -> dict:
    """``architecture(highlight).to_dict()``, drawn once for all the tests of this file (each
    chapter's diagram takes about 0.4 s to draw and check); a fresh copy for each test."""
    return json.loads(_architecture_spec(highlight))


@pytest.mark.parametrize("highlight", [None, *CHAPTERS])
def test_architecture_is_a_valid_vega_lite_spec(highlight):
    spec = architecture_spec(highlight)
    assert spec["description"].startswith("Diagram:")
    assert spec["usermeta"]["embedOptions"]["actions"] is False
    assert len(json.dumps(spec)) < 150_000


def test_every_link_is_a_chapter_of_the_toc_or_an_expected_chapter():
    links = hrefs(architecture_spec())
    pages = {link.removesuffix(".html") for link in links}
    assert all(link.endswith(".html") and "/" not in link for link in links), links
    listed = toc_pages()
    for page in pages:
        assert page in EXPECTED_CHAPTERS, f"{page} is not a chapter"
    missing = sorted(page for page in pages if page not in listed)
    assert not missing, missing
    # chapters 16 to 20 are linked from their own pages' maps only (the other pages' stored maps are
    # unchanged)
    own_page_only = {
        "16_modern_decoder",
        "17_past_one_machine",
        "18_what_training_costs",
        "19_instructions_and_lora",
        "20_preferences_and_rewards",
    }
    assert pages == set(EXPECTED_CHAPTERS) - own_page_only, (
        f"chapters without a link from the map: {set(EXPECTED_CHAPTERS) - pages}"
    )
    assert "16_modern_decoder.html" in hrefs(architecture_spec(16))
    assert "17_past_one_machine.html" in hrefs(architecture_spec(17))
    assert "18_what_training_costs.html" in hrefs(architecture_spec(18))
    assert "19_instructions_and_lora.html" in hrefs(architecture_spec(19))
    assert "20_preferences_and_rewards.html" in hrefs(architecture_spec(20))


@pytest.mark.parametrize(
    ("highlight", "expected"),
    [
        (3, {"enc_attn", "dec_self_attn", "dec_cross_attn"}),
        ("04_add_and_norm", {"enc_norm1", "enc_norm2", "dec_norm1", "dec_norm2", "dec_norm3"}),
        ("cross_attention", {"dec_cross_attn", "decoder"}),
        (8, {"linear", "softmax"}),
        (1, {"enc_embed", "dec_embed", "enc_pos", "dec_pos"}),
    ],
)
def test_the_highlight_lands_on_the_right_blocks(highlight, expected):
    blocks = [row for row in rows(architecture_spec(highlight)) if "id" in row]
    lit = {row["id"] for row in blocks if row["highlighted"]}
    assert lit == expected
    assert all(row["opacity"] < 1 for row in blocks if row["id"] not in expected)
    # The highlighted blocks link to the chapter that builds them (frames may link to the layer's chapter).
    assert all(row["href"].endswith(".html") for row in blocks)


def test_no_highlight_shows_every_block_plainly():
    blocks = [row for row in rows(architecture_spec()) if "id" in row]
    assert len(blocks) == 18
    assert not any(row["highlighted"] for row in blocks)
    assert all(row["opacity"] == 1 for row in blocks)


def test_every_chapter_highlights_something_and_names_it_in_the_title():
    for number in CHAPTERS:
        spec = architecture_spec(number)
        assert any(row.get("highlighted") for row in rows(spec)), number
        assert spec["title"]["subtitle"][0].startswith(f"Chapter {number},")
        assert f"chapter {number})" in spec["description"]


def test_bad_highlight_names_the_value_and_the_choices():
    with pytest.raises(ValueError, match=r"multi_head_attention.*got highlight='attn'"):
        architecture("attn")
    with pytest.raises(ValueError, match="highlight=99"):
        architecture(99)
    assert resolve_highlight("book/06_masking.ipynb") == ("masking", 6)


def test_tooltips_give_shapes_and_parameter_counts_from_the_config():
    counts = parameter_counts(SMALL)
    table = {row["id"]: row for row in rows(architecture(config=SMALL).to_dict()) if "id" in row}
    assert table["enc_attn"]["output"] == "(3, 7, 64)"
    assert table["dec_self_attn"]["output"] == "(3, 5, 64)"
    assert table["linear"]["output"] == "(3, 5, 50) logits"
    assert table["enc_attn"]["parameters"].startswith(f"{4 * (64 * 64 + 64):,} per layer (×2 layers")
    assert counts["attention"] == 4 * (64 * 64 + 64)
    assert counts["feed_forward"] == 64 * 256 + 256 + 256 * 64 + 64
    assert counts["layer_norm"] == 2 * 64
    assert counts["encoder_layer"] == counts["attention"] + counts["feed_forward"] + 2 * counts["layer_norm"]
    assert counts["decoder_layer"] == 2 * counts["attention"] + counts["feed_forward"] + 3 * counts["layer_norm"]


@pytest.mark.parametrize(
    "config",
    [BASE, SMALL, dataclasses.replace(SMALL, tie_weights=False, source_vocab=40)],
    ids=["base", "small-tied", "small-untied"],
)
def test_parameter_counts_are_the_modules_own(config):
    import torch

    from transformer_book import (
        DecoderLayer,
        Embeddings,
        EncoderLayer,
        LayerNorm,
        MultiHeadAttention,
        OutputLayer,
        PositionwiseFeedForward,
        make_model,
    )

    def count(module) -> int:
        return sum(parameter.numel() for parameter in module.parameters())

    d_model, heads, d_ff = config.d_model, config.heads, config.d_ff
    with torch.device("meta"):  # shapes only
        modules = {
            "embedding": Embeddings(config.source_vocab, d_model),
            "attention": MultiHeadAttention(d_model, heads),
            "layer_norm": LayerNorm(d_model),
            "feed_forward": PositionwiseFeedForward(d_model, d_ff),
            "encoder_layer": EncoderLayer(d_model, heads, d_ff),
            "decoder_layer": DecoderLayer(d_model, heads, d_ff),
            "generator": OutputLayer(d_model, config.target_vocab),
            "model": make_model(
                config.source_vocab,
                config.target_vocab,
                num_layers=config.num_layers,
                d_model=d_model,
                d_ff=d_ff,
                heads=heads,
                tie_weights=config.tie_weights,
            ),
        }
    assert parameter_counts(config) == {name: count(module) for name, module in modules.items()}


def test_base_model_parameter_count_is_the_papers_size():
    counts = parameter_counts()
    # Tied embeddings: one 37000 x 512 table, 6+6 layers and the generator's bias: about 63M (paper: 65M).
    assert 60_000_000 < counts["model"] < 66_000_000
    assert counts["model"] == (counts["embedding"] + 6 * (counts["encoder_layer"] + counts["decoder_layer"]) + 37000)


def test_config_is_validated_with_clear_errors():
    with pytest.raises(ValueError, match="d_model=10, heads=3"):
        ModelConfig(d_model=10, heads=3)
    with pytest.raises(ValueError, match="d_ff=0"):
        ModelConfig(d_ff=0)
    with pytest.raises(ValueError, match="unknown config keys \\['dmodel'\\]"):
        book_charts.attention_diagram({"dmodel": 8})


def test_config_from_a_model_reads_its_sizes():
    import torch

    from transformer_book import make_model

    with torch.device("meta"):
        model = make_model(50, 50, num_layers=2, d_model=64, d_ff=256, heads=4, tie_weights=True)
    config = ModelConfig.from_model(model, batch=3)
    assert (config.d_model, config.heads, config.d_ff, config.num_layers) == (64, 4, 256, 2)
    assert config.tie_weights and config.batch == 3
    with pytest.raises(TypeError, match="Linear"):
        ModelConfig.from_model(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("draw", [*MECHANISMS, book_charts.masks_diagram])
def test_mechanism_diagrams_are_valid_and_described(draw):
    spec = draw().to_dict()
    assert spec["description"].startswith("Diagram:")
    assert spec["usermeta"]["embedOptions"]["actions"] is False
    assert layers(spec), "no marks"
    assert all("tooltip" in view["encoding"] for view in layers(spec) if view["mark"]["type"] == "rect")


@pytest.mark.parametrize("draw", MECHANISMS)
def test_mechanism_shapes_follow_the_config(draw):
    base = json.dumps(draw().to_dict(), ensure_ascii=False)
    small = json.dumps(draw(SMALL).to_dict(), ensure_ascii=False)
    assert "(batch, " in base and "512" not in small
    assert "(3, " in small and "(batch, " not in small  # every shape is written from the config


def test_attention_diagram_shapes_and_optional_mask():
    spec = book_charts.attention_diagram(SMALL).to_dict()
    text = json.dumps(spec, ensure_ascii=False)
    assert "(3, 4, 5, 7)" in text  # scores: (batch, heads, target, source)
    assert "÷ 4" in text  # sqrt(d_k = 16)
    assert "Mask (optional)" in text
    assert "Mask" not in json.dumps(book_charts.attention_diagram(SMALL, masked=False).to_dict()["datasets"])


def test_masks_diagram_uses_the_package_masks():
    data = rows(book_charts.masks_diagram(length=4, padding=1).to_dict())
    allowed = {(row["mask"], row["query"], row["key"]) for row in data if row["may attend"] == "yes"}
    assert ("Padding", 0, 3) not in allowed and ("Padding", 0, 2) in allowed
    assert ("Look-ahead", 1, 2) not in allowed and ("Look-ahead", 2, 1) in allowed
    assert {(q, k) for name, q, k in allowed if name == "Combined"} == {
        (q, k) for q in range(4) for k in range(3) if k <= q
    }
    with pytest.raises(ValueError, match="padding=4"):
        book_charts.masks_diagram(length=4, padding=4)


def test_kv_cache_appends_one_position_per_step():
    data = rows(book_charts.kv_cache_diagram(SMALL, step=3).to_dict())
    appended = {(row["tensor"], row["position"]) for row in data if row["status"] == "appended at this step"}
    assert appended == {("self-attn keys", 2), ("self-attn values", 2)}
    assert {row["shape per layer"] for row in data if row["tensor"] == "self-attn keys"} == {"(3, 4, 3, 16)"}
    with pytest.raises(ValueError, match="step=0"):
        book_charts.kv_cache_diagram(step=0)


def test_width_scales_the_drawing():
    assert architecture(width=540).to_dict()["width"] == 540
    with pytest.raises(ValueError, match="width=0"):
        architecture(width=0)
