"""The logit lens (issue 36): each layer's guess at the next token, on the built pages.

For the poet and the translator's decoder, each page draws one row per layer (page.js's
lensHtml): each layer's output through the final norm and the output layer, its most probable
next token (data-token) and that token's probability (data-probability). Checked in headless
Chromium, served on 127.0.0.1 only, against the package's model on the same weights (each
layer's output taken with a forward hook):

- every layer's lens is Python's: the same token, its probability within 1e-4;
- the last layer's lens is the model's own output.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest
import torch

import export_poet_playground as exporter
import playground_files
from browser_support import local_only_tab, serve

REPO_ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("BOOK_HTML", REPO_ROOT / "_build" / "html"))
PLAYGROUND = REPO_ROOT / "book" / "_static" / "playground"
TOLERANCE = 1e-4
CELLS_JS = """(id) => [...document.querySelectorAll(`#${id} td[data-layer]`)].map((cell) => ({
  layer: Number(cell.dataset.layer), step: Number(cell.dataset.step),
  token: cell.dataset.token, p: Number(cell.dataset.probability)}))"""


def drawn_lens(browser, page: str, fragment: str, ready: str, lens: str) -> list[dict]:
    if not (SITE / page).exists():
        pytest.fail(f"{SITE / page} is not built: run `jupyter-book build .` first")
    context, tab, outside, errors = local_only_tab(browser, console_types=("error", "warning"))
    tab.goto(f"{serve(str(SITE))}/{page}#{fragment}", wait_until="load")
    tab.wait_for_function(ready, timeout=60_000)
    cells = tab.evaluate(CELLS_JS, lens)
    extra = tab.evaluate(
        "() => document.querySelector('#poet-poem')?.dataset.text ?? document.querySelector('#pg-input').value"
    )
    context.close()
    assert not outside and not errors, (outside, errors)
    return cells, extra


def layer_outputs(layers) -> list:
    outputs = []
    for layer in layers:
        layer.register_forward_hook(lambda module, args, output: outputs.append(output))
    return outputs


def compare(cells: list[dict], lens: list[torch.Tensor], own: torch.Tensor, label) -> float:
    """lens[layer]: (steps, vocab) probabilities; own: (steps, vocab), the model's output."""
    worst = 0.0
    layers = len(lens)
    assert len(cells) == layers * lens[0].size(0), "a cell per layer and step"
    for cell in cells:
        p = lens[cell["layer"]][cell["step"]]
        top = int(p.argmax())
        assert cell["token"] == label(top), cell
        worst = max(worst, abs(cell["p"] - p[top].item()))
        if cell["layer"] == layers - 1:  # the last layer's lens: the model's own output
            assert top == int(own[cell["step"]].argmax())
            assert abs(cell["p"] - own[cell["step"]].max().item()) <= TOLERANCE
    assert worst <= TOLERANCE, f"lens probabilities differ by {worst:.2e}"
    return worst


@torch.no_grad()
def test_the_poets_logit_lens_is_pythons(browser):
    poet, meta = exporter.load_poet(PLAYGROUND / "poet.json")
    cells, text = drawn_lens(
        browser, "book/playground_poems.html",
        "mode=acrostic&prompt=" + quote("山高水长") + "&temperature=0.8&top_p=0.9&seed=5",
        "() => document.querySelector('#poet-poem').dataset.done === '1' && "
        "document.querySelector('#poet-lens').dataset.poem",
        "poet-lens",
    )  # fmt: skip
    ids = [poet.vocab.boundary_id] + poet.vocab.encode(text, boundaries=False)
    model = poet.model
    outputs = layer_outputs(model.layers)
    own = model(torch.tensor([ids]))[0].double().softmax(-1)  # (seq, vocab)
    weight = model.output_weight().double()
    lens = [(model.final_norm(x)[0].double() @ weight.T).softmax(-1) for x in outputs]
    worst = compare(cells, lens, own, lambda i: meta["tokens"][i])
    print(f"\npoet: {len(lens)} layers x {len(ids)} positions, largest difference {worst:.1e}")


@torch.no_grad()
def test_the_translators_logit_lens_is_pythons(browser):
    from transformer_book import greedy_decode, pretrained_translator, subsequent_mask

    model, meta = playground_files.load_model(PLAYGROUND / "translator.json")
    text = meta["examples"][0]
    cells, _ = drawn_lens(
        browser, "book/playground.html", f"task=translator&text={quote(text)}",
        f"() => document.querySelector('#pg-lens').dataset.input === {text!r}",
        "pg-lens",
    )  # fmt: skip
    shipped, _ = pretrained_translator()  # its tokenizer; the model is the 8-bit file's
    source = torch.tensor([shipped.source_ids(text)])  # (1, source)
    limit = min(2 * source.size(1) + 10, meta["max_new_tokens"])
    tokens = greedy_decode(model, source, None, meta["start_id"], limit, end_id=meta["end_id"])
    outputs = layer_outputs(model.decoder.layers)
    decoder_input = tokens[:, :-1]  # (1, steps)
    hidden = model.decode(model.encode(source, None), None, decoder_input,
                          subsequent_mask(decoder_input.size(1)))  # fmt: skip
    own = model.generator.proj(hidden)[0].double().softmax(-1)  # (steps, vocab)
    lens = [model.generator.proj(model.decoder.norm(x))[0].double().softmax(-1) for x in outputs]
    target = meta["target_tokens"]
    worst = compare(cells, lens, own, lambda i: "␣" if target[i] == " " else target[i])
    print(f"\ntranslator: {len(lens)} layers x {decoder_input.size(1)} steps, largest difference {worst:.1e}")
