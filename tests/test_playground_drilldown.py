"""Attention unfolded (issue 36): one query's scores, mask and weights, on the built pages.

For a layer, head and query position, each page draws a table (page.js's drillDownHtml): per
key, the scaled score q·k/√d_k, whether a mask hides it, and the weight. Checked in headless
Chromium, served on 127.0.0.1 only, for the poet's self-attention and the translator's
cross-attention and masked decoder self-attention:

- the softmax of the drawn scores, the mask applied, equals the drawn weights within 1e-6;
- masked cells (the look-ahead mask: keys after the query) have weight 0;
- the scores are PyTorch's (the package's model on the same weights, the same tokens) within 1e-4;
- the value side (issue 45): each key's value vector, the head's output (the weighted sum of
  the values drawn) and the attention's output after W^O are PyTorch's within 1e-4.
"""

from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import quote

import pytest
import torch

import export_poet_playground as exporter
import playground_files
from browser_support import local_only_tab, page_url, wait_for_translation

REPO_ROOT = Path(__file__).resolve().parents[1]
PLAYGROUND = REPO_ROOT / "book" / "_static" / "playground"
TOLERANCE = 1e-4
ROWS_JS = """(id) => [...document.querySelectorAll(`#${id} .drill:not(.drill-values) tbody tr`)].map((row) => ({
  score: Number(row.dataset.score), masked: row.dataset.masked === '1',
  weight: Number(row.dataset.weight)}))"""


def open_page(browser, page: str, fragment: str):
    url = page_url(page)
    context, tab, outside, errors = local_only_tab(browser, console_types=("error", "warning"))
    tab.goto(f"{url}#{fragment}", wait_until="load")
    return context, tab, outside, errors


def open_poem(browser):
    """The poem page continuing 白日依山尽， greedily, layer 1 and head 2 unfolded, once the poem is
    written: (context, tab, outside requests, errors, the poem)."""
    context, tab, outside, errors = open_page(
        browser, "book/playground_poems.html",
        "mode=continue&prompt=" + quote("白日依山尽，") + "&temperature=0&top_p=0.9&seed=0"
        "&layer=1&head=2",
    )  # fmt: skip
    tab.wait_for_function("() => document.querySelector('#poet-poem').dataset.done === '1'",
                          timeout=60_000)  # fmt: skip
    return context, tab, outside, errors, tab.locator("#poet-poem").get_attribute("data-text")


@pytest.fixture
def translator():
    """The translator page's model (the 8-bit file's, fresh for each test's hooks), its metadata
    and the example the tests translate."""
    model, meta = playground_files.load_model(PLAYGROUND / "translator.json")
    return model, meta, meta["examples"][1]


def open_translation(browser, text: str, head: int):
    """The translator page once it has translated ``text`` (beam 4), layer 1's cross-attention
    head ``head`` unfolded: (context, tab, outside requests, errors)."""
    context, tab, outside, errors = open_page(
        browser, "book/playground.html", f"task=translator&text={quote(text)}&beam=4&attn=cross&layer=1&head={head}"
    )
    wait_for_translation(tab, text, drawn=False)
    return context, tab, outside, errors


def drawn_rows(tab, drill: str, select: str, title: str, query: int) -> list[dict]:
    tab.wait_for_function(f"() => document.querySelector('#{select}').options.length > {query}",
                          timeout=60_000)  # fmt: skip
    tab.select_option(f"#{select}", str(query))
    tab.wait_for_function(
        "([id, key]) => document.querySelector(`#${id}`).dataset.drawn === key",
        arg=[drill, f"{title}|{query}"],
        timeout=60_000,
    )
    return tab.evaluate(ROWS_JS, drill)


def check_rows(rows: list[dict], masked_after: int | None) -> None:
    """The drawn weights are the softmax of the drawn scores, the mask applied."""
    visible = [row["score"] for row in rows if not row["masked"]]
    top = max(visible)
    total = sum(math.exp(score - top) for score in visible)
    for k, row in enumerate(rows):
        expected_masked = masked_after is not None and k > masked_after
        assert row["masked"] == expected_masked, (k, row)
        if row["masked"]:
            assert row["weight"] == 0 and row["score"] == -math.inf, row
        else:
            assert abs(math.exp(row["score"] - top) / total - row["weight"]) <= 1e-6, row


def greedy_output(model, meta: dict, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The translator page's greedy output for ``text``, decoded by the package's model: the
    source ids (1, source) and the decoder's input, the output without its last token (1, steps)."""
    from transformer_book import greedy_decode, pretrained_translator

    shipped, _ = pretrained_translator()  # its tokenizer; the model is the 8-bit file's
    source = torch.tensor([shipped.source_ids(text)])  # (1, source)
    limit = min(2 * source.size(1) + 10, meta["max_new_tokens"])
    tokens = greedy_decode(model, source, None, meta["start_id"], limit, end_id=meta["end_id"])
    return source, tokens[:, :-1]


def decode_with_weights(model, source: torch.Tensor, decoder_input: torch.Tensor) -> None:
    """One pass of the translator over its own output, attention weights kept (for the hooks)."""
    from transformer_book import subsequent_mask

    model.decode(model.encode(source, None), None, decoder_input,
                 subsequent_mask(decoder_input.size(1)), need_weights=True)  # fmt: skip


def capture_scores(attention_module, store: list):
    """Wraps ``attend`` of one attention module: keeps its scaled scores (batch, heads, q, k)."""
    original = attention_module.attend

    def attend(queries, keys, values, mask, need_weights):
        scale = attention_module.scale or 1 / math.sqrt(queries.size(-1))
        store.append(queries @ keys.transpose(-2, -1) * scale)
        return original(queries, keys, values, mask, need_weights)

    attention_module.attend = attend


@torch.no_grad()
def test_the_poets_attention_unfolds_as_pytorchs(browser):
    poet, _ = exporter.load_poet(PLAYGROUND / "poet.json")
    context, tab, outside, errors, text = open_poem(browser)
    query = 8
    rows = drawn_rows(tab, "poet-drill", "poet-query", "layer 1, head 2", query)
    context.close()
    check_rows(rows, masked_after=query)
    ids = [poet.vocab.boundary_id] + poet.vocab.encode(text, boundaries=False)
    store = []
    capture_scores(poet.model.layers[1].self_attn, store)
    poet.model(torch.tensor([ids]), need_weights=True)
    theirs = store[0][0, 2, query, : query + 1].double()  # (keys up to the query,)
    ours = torch.tensor([row["score"] for row in rows[: query + 1]], dtype=torch.float64)
    difference = (ours - theirs).abs().max().item()
    assert difference <= TOLERANCE, f"scores differ by {difference:.2e}"
    assert not outside and not errors, (outside, errors)


@torch.no_grad()
def test_the_translators_attention_unfolds_as_pytorchs(browser, translator):
    model, meta, text = translator
    context, tab, outside, errors = open_translation(browser, text, head=2)
    cross = drawn_rows(tab, "pg-drill", "pg-query", "decoder cross-attention, layer 1, head 2", 2)
    tab.select_option("#pg-kind", "1")  # the decoder's self-attention: the look-ahead mask
    own = drawn_rows(tab, "pg-drill", "pg-query", "decoder self-attention, layer 1, head 2", 2)
    context.close()
    check_rows(cross, masked_after=None)
    check_rows(own, masked_after=2)

    source, decoder_input = greedy_output(model, meta, text)
    cross_store, self_store = [], []
    capture_scores(model.decoder.layers[1].cross_attn, cross_store)
    capture_scores(model.decoder.layers[1].self_attn, self_store)
    decode_with_weights(model, source, decoder_input)
    for rows, store, keys in ((cross, cross_store, len(cross)), (own, self_store, 3)):
        theirs = store[0][0, 2, 2, :keys].double()
        ours = torch.tensor([row["score"] for row in rows[:keys]], dtype=torch.float64)
        difference = (ours - theirs).abs().max().item()
        assert difference <= TOLERANCE, f"scores differ by {difference:.2e}"
    assert not outside and not errors, (outside, errors)


# --- The value side (issue 45): weight × value, summed, is the head's output; W^O joins ----

VALUES_JS = """(id) => {
  const table = document.querySelector(`#${id} .drill-values`);
  return {
    rows: [...table.querySelectorAll('tbody tr')].map((row) => ({
      weight: Number(row.dataset.weight), value: JSON.parse(row.dataset.value)})),
    head: JSON.parse(table.dataset.headOutput),
    output: JSON.parse(table.dataset.output),
    text: document.querySelector(`#${id}`).innerText,
  };
}"""


def capture_value_side(attention_module, store: dict):
    """Forward hooks on one attention module's W^V and W^O: the values (batch, keys, d_model),
    the merged heads W^O reads (batch, queries, d_model) and the output it writes."""
    attention_module.value_proj.register_forward_hook(lambda module, inputs, output: store.setdefault("values", output))
    attention_module.output_proj.register_forward_hook(
        lambda module, inputs, output: store.update(merged=inputs[0], output=output)
    )


def check_value_side(drawn: dict, store: dict, query: int, head: int, keys: int) -> None:
    values = store["values"][0].double()  # (keys, d_model)
    d_k = len(drawn["head"])
    ours_v = torch.tensor([row["value"] for row in drawn["rows"][:keys]], dtype=torch.float64)
    weights = torch.tensor([row["weight"] for row in drawn["rows"][:keys]], dtype=torch.float64)
    head_out = torch.tensor(drawn["head"], dtype=torch.float64)
    # On the page: the head's output is the weighted sum of the values drawn beside it.
    assert (weights @ ours_v - head_out).abs().max().item() <= 1e-9
    # And each is PyTorch's.
    theirs_v = values[:keys, head * d_k : (head + 1) * d_k]
    assert (ours_v - theirs_v).abs().max().item() <= TOLERANCE
    theirs_head = store["merged"][0, query, head * d_k : (head + 1) * d_k].double()
    assert (head_out - theirs_head).abs().max().item() <= TOLERANCE
    theirs_out = store["output"][0, query].double()
    ours_out = torch.tensor(drawn["output"], dtype=torch.float64)
    assert ours_out.shape == theirs_out.shape
    assert (ours_out - theirs_out).abs().max().item() <= TOLERANCE
    assert "W^O" in drawn["text"] and f"head {head}'s output" in drawn["text"]


@torch.no_grad()
def test_the_poets_value_side_is_pytorchs(browser):
    poet, _ = exporter.load_poet(PLAYGROUND / "poet.json")
    context, tab, outside, errors, text = open_poem(browser)
    query = 8
    drawn_rows(tab, "poet-drill", "poet-query", "layer 1, head 2", query)
    drawn = tab.evaluate(VALUES_JS, "poet-drill")
    context.close()
    ids = [poet.vocab.boundary_id] + poet.vocab.encode(text, boundaries=False)
    store = {}
    capture_value_side(poet.model.layers[1].self_attn, store)
    poet.model(torch.tensor([ids]), need_weights=True)
    check_value_side(drawn, store, query, head=2, keys=query + 1)
    assert all(row["weight"] == 0 for row in drawn["rows"][query + 1 :])  # masked: no share
    assert not outside and not errors, (outside, errors)


@torch.no_grad()
def test_the_translators_value_side_is_pytorchs(browser, translator):
    model, meta, text = translator
    context, tab, outside, errors = open_translation(browser, text, head=3)
    drawn_rows(tab, "pg-drill", "pg-query", "decoder cross-attention, layer 1, head 3", 2)
    drawn = tab.evaluate(VALUES_JS, "pg-drill")
    context.close()
    source, decoder_input = greedy_output(model, meta, text)
    store = {}
    capture_value_side(model.decoder.layers[1].cross_attn, store)
    decode_with_weights(model, source, decoder_input)
    check_value_side(drawn, store, query=2, head=3, keys=source.size(1))
    assert not outside and not errors, (outside, errors)
