"""The distribution of any step (issue 36), on the built playground pages, against the package.

Each written character of a poem is an element with ``data-step``; clicking or tabbing to it
opens that step's bars: ``data-token`` and ``data-probability`` (the probability in the
distribution the character was drawn from: after the temperature and the top-p cut,
renormalised), ``data-chosen`` on the written one. Checked in headless Chromium, served on
127.0.0.1 only:

- the kept probabilities of a step sum to 1 within 1e-6;
- the kept set is the package's own top-p filter (transformer_book.decoding.top_p_filter) on the
  same step's logits, computed by the package's GPT from the poem's ids;
- moving the temperature redraws the bars without running the model again: temperature 1.5
  gives a higher entropy than 0.5;
- at temperature 0 the one bar is the most probable character, and it is the written one.

The translator page's steps show the softmax the decoder chose from (the package's own logits,
within 1e-4); its temperature and top-p reshape them into the package's top-p set.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from urllib.parse import quote

import pytest
import torch

import export_poet_playground as exporter
from browser_support import local_only_tab, serve, wait_for_translation

REPO_ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("BOOK_HTML", REPO_ROOT / "_build" / "html"))
JSON_PATH = REPO_ROOT / "book" / "_static" / "playground" / "poet.json"
PAGE = "book/playground_poems.html"
BARS = 10  # page.js: the most probable characters shown as bars
PROMPT = "白日依山尽，"  # a first verse to continue: only <pad> and <unk> are masked
BARS_JS = """() => {
  const bars = [...document.querySelectorAll('#poet-bars li[data-token]')];
  return {
    kept: Number(document.querySelector('#poet-bars').dataset.kept),
    tokens: bars.map((bar) => bar.dataset.token),
    p: bars.map((bar) => Number(bar.dataset.probability)),
    chosen: bars.filter((bar) => bar.hasAttribute('data-chosen')).map((b) => b.dataset.token),
    text: document.querySelector('#poet-bars').innerText,
    rest: [...document.querySelectorAll('#poet-bars li[data-rest]')].map((line) =>
      [Number(line.dataset.rest), Number(line.dataset.probability)]),
  };
}"""


@pytest.fixture(scope="module")
def poet():
    return exporter.load_poet(JSON_PATH)


def open_poem(browser, fragment: str):
    if not (SITE / PAGE).exists():
        pytest.fail(f"{SITE / PAGE} is not built: run `jupyter-book build .` first")
    context, tab, outside, errors = local_only_tab(browser, console_types=("error", "warning"))
    tab.goto(f"{serve(str(SITE))}/{PAGE}#{fragment}", wait_until="load")
    tab.wait_for_function("() => document.querySelector('#poet-poem').dataset.done === '1'", timeout=60_000)
    return context, tab, outside, errors


def poem_on_page(tab):
    """The poem on the page: its text, and its characters (one element a step)."""
    poem = tab.locator("#poet-poem")
    return poem.get_attribute("data-text"), poem.locator(".poet-token")


def bars_for(tab, temperature: str) -> dict:
    tab.locator("#poet-bars-temperature").fill(temperature)
    tab.wait_for_function(
        "(t) => document.querySelector('#poet-bars').dataset.temperature === t",
        arg=temperature,  # as JavaScript writes the number: "0.8", "1.5", "0.5"
    )
    return tab.evaluate(BARS_JS)


def next_logits(poet, text: str, length: int) -> torch.Tensor:
    """(vocab,) the poet's logits after <s> and the first ``length - 1`` characters of
    ``text``, with padding and <unk> masked as the page and ``Poet.write`` mask them."""
    ids = [poet.vocab.boundary_id] + poet.vocab.encode(text, boundaries=False)
    logits = poet.model(torch.tensor([ids[:length]]))[0, -1].double()
    logits[poet.vocab.pad_id] = logits[poet.vocab.unk_id] = -math.inf
    return logits


def entropy(p: list[float]) -> float:
    return -sum(x * math.log(x) for x in p if x > 0)


@torch.no_grad()
def test_a_steps_bars_are_the_packages_top_p_distribution(browser, poet):
    from transformer_book import top_p_filter

    poet, meta = poet
    context, tab, outside, errors = open_poem(
        browser, "mode=continue&prompt=白日依山尽，&temperature=0.8&top_p=0.9&seed=3"
    )
    text, tokens = poem_on_page(tab)
    count = tokens.count()
    step = 3
    tokens.nth(step).click()
    at_08 = bars_for(tab, "0.8")
    number = tab.locator("#poet-poem").get_attribute("data-number")
    at_15 = bars_for(tab, "1.5")
    at_05 = bars_for(tab, "0.5")
    after = tab.locator("#poet-poem").get_attribute("data-number")
    still, _ = poem_on_page(tab)
    context.close()

    assert text.startswith(PROMPT) and count == len(text) - len(PROMPT)
    ids = [poet.vocab.boundary_id] + poet.vocab.encode(text, boundaries=False)
    position = len(ids) - count - 1 + step  # the position whose logits chose step `step`
    logits = next_logits(poet, text, position + 1)  # (vocab,)
    written = meta["tokens"][ids[position + 1]]
    spread = {}  # temperature -> the entropy of the package's kept distribution
    for temperature, bars in ((0.8, at_08), (1.5, at_15), (0.5, at_05)):
        cut = top_p_filter(logits / temperature, 0.9)
        theirs = dict(zip((meta["tokens"][i] for i in range(len(cut))), cut.softmax(-1).tolist()))
        theirs = {token: p for token, p in theirs.items() if p > 0}  # the package's kept set
        assert bars["kept"] == len(theirs), temperature
        # the ten most probable each a bar, the written one too, the rest in one line: all of it
        shown = bars["p"][:BARS]
        assert len(shown) == min(BARS, len(theirs)) and shown == sorted(shown, reverse=True)
        assert all(abs(theirs[token] - p) <= 1e-6 for token, p in zip(bars["tokens"], bars["p"]))
        unshown = [p for token, p in theirs.items() if token not in bars["tokens"]]
        assert max(unshown, default=0) <= min(shown) + 1e-6, "the bars are the most probable"
        rest = [(len(unshown), sum(unshown))] if unshown else []
        assert [count for count, _ in bars["rest"]] == [count for count, _ in rest]
        assert all(abs(a - b) <= 1e-6 for (_, a), (_, b) in zip(bars["rest"], rest))
        total = sum(bars["p"]) + sum(p for _, p in bars["rest"])
        assert abs(total - 1) <= 1e-6, (temperature, total)
        spread[temperature] = entropy(list(theirs.values()))
    assert at_08["chosen"] == [written], "the written character is marked"
    assert spread[1.5] > spread[0.5]  # the bars above are these distributions
    assert at_15["kept"] > at_05["kept"] and at_15["p"][0] < at_05["p"][0]
    assert f"{written}" in at_08["text"] and "(chosen" in at_08["text"]  # as text, too
    assert (after, still) == (number, text), "moving the temperature wrote another poem"
    print(
        f"\nstep {step} ({written}): kept {at_05['kept']}, {at_08['kept']}, {at_15['kept']} "
        f"characters at temperature 0.5, 0.8, 1.5; entropy {spread[0.5]:.2f} < "
        f"{spread[1.5]:.2f} nats"
    )
    assert not outside and not errors, (outside, errors)


@torch.no_grad()
def test_temperature_0_marks_the_most_probable_character(browser, poet):
    poet, meta = poet
    context, tab, outside, errors = open_poem(browser, "mode=acrostic&prompt=春花秋月&temperature=0&top_p=0.9&seed=0")
    text, tokens = poem_on_page(tab)
    steps = tokens.count()
    tokens.nth(1).focus()  # tabbing to a character opens it too
    tab.wait_for_function("() => !document.querySelector('#poet-distribution').hidden "
                          "&& document.querySelector('#poet-bars').dataset.kept")  # fmt: skip
    bars = tab.evaluate(BARS_JS)
    context.close()
    assert text == poet.write("春花秋月", temperature=0, acrostic=True)
    logits = next_logits(poet, text, 2)  # step 1: after <s> and one character
    logits[poet.vocab.boundary_id] = -math.inf  # a 藏头诗 cannot end before its last verse
    assert steps == len(text)
    assert bars["p"] == [1.0] and bars["kept"] == 1
    assert bars["tokens"] == bars["chosen"] == [meta["tokens"][int(logits.argmax())]]
    assert not outside and not errors, (outside, errors)


@torch.no_grad()
def test_a_translator_steps_bars_are_the_packages(browser):
    import playground_files
    from transformer_book import greedy_decode, subsequent_mask, top_p_filter

    model, meta = playground_files.load_model(JSON_PATH.with_name("translator.json"))
    text = meta["examples"][1]
    page = "book/playground.html"
    context, tab, outside, errors = local_only_tab(browser, console_types=("error", "warning"))
    tab.goto(f"{serve(str(SITE))}/{page}#task=translator&text={quote(text)}", wait_until="load")
    wait_for_translation(tab, text, drawn=False)
    step = 1
    tab.locator("#pg-greedy-tokens .pg-token").nth(step).click()
    tab.wait_for_function("() => document.querySelector('#pg-bars').dataset.drawn"
                          "?.startsWith('pg-greedy|1|')")  # fmt: skip
    translator_bars = BARS_JS.replace("#poet-bars", "#pg-bars")  # the same figures
    plain = tab.evaluate(translator_bars)
    tab.locator("#pg-top-p").fill("0.9")
    tab.locator("#pg-temperature").fill("0.5")
    tab.wait_for_function("() => document.querySelector('#pg-bars').dataset.kept !== "
                          f"'{plain['kept']}'")  # fmt: skip
    reshaped = tab.evaluate(translator_bars)
    context.close()

    from transformer_book import pretrained_translator

    shipped, _ = pretrained_translator()  # its tokenizer; the model is the 8-bit file's
    source_ids = shipped.source_ids(text)
    source = torch.tensor([source_ids])  # (1, source)
    limit = min(2 * len(source_ids) + 10, meta["max_new_tokens"])
    ids = greedy_decode(model, source, None, meta["start_id"], limit, end_id=meta["end_id"])
    decoder_input = ids[:, : step + 1]  # (1, step + 1)
    hidden = model.decode(model.encode(source, None), None, decoder_input,
                          subsequent_mask(step + 1))  # fmt: skip
    logits = model.generator.proj(hidden)[0, -1].double()  # (vocab,)
    probabilities = logits.softmax(-1)
    top = probabilities.topk(len(plain["p"]))
    target = meta["target_tokens"]
    assert plain["kept"] == len(target), "no cut: every token is kept"
    assert plain["chosen"] == [target[int(ids[0, step + 1])]] == [plain["tokens"][0]]
    assert plain["tokens"] == [target[i] for i in top.indices.tolist()]
    assert max(abs(a - b) for a, b in zip(plain["p"], top.values.tolist())) <= 1e-4
    kept = torch.isfinite(top_p_filter(logits / 0.5, 0.9)).nonzero().flatten().tolist()
    assert reshaped["kept"] == len(kept) == len(reshaped["p"]), "all kept tokens shown"
    assert set(reshaped["tokens"]) == {target[i] for i in kept}
    assert abs(sum(reshaped["p"]) - 1) <= 1e-6
    assert not outside and not errors, (outside, errors)


VIEWS = [(1280, False), (1280, True), (390, False), (390, True)]


@pytest.mark.parametrize(("width", "dark"), VIEWS,
                         ids=[f"{w}-{'dark' if d else 'light'}" for w, d in VIEWS])  # fmt: skip
def test_every_view_fits_the_screen(browser, width, dark):
    """Both pages with everything open (a step's bars, the unfolded query, the logit lens):
    nothing pans sideways, at a laptop's and a phone's width, in the light and dark themes."""
    pages = [
        ("book/playground.html", "task=translator&text="
         + quote("Tom told Mary that he would like to visit Boston next summer.")
         + "&beam=4&attn=cross&layer=1&head=2",
         "() => document.querySelector('#pg-lens').dataset.input", "#pg-greedy-tokens .pg-token"),
        ("book/playground_poems.html", "mode=acrostic&prompt=" + quote("春花秋月")
         + "&temperature=1.5&top_p=0.95&seed=3",
         "() => document.querySelector('#poet-lens').dataset.poem", "#poet-poem .poet-token"),
    ]  # fmt: skip
    for page, fragment, ready, token in pages:
        if not (SITE / page).exists():
            pytest.fail(f"{SITE / page} is not built: run `jupyter-book build .` first")
        context, tab, outside, errors = local_only_tab(browser, width, dark=dark, console_types=("error", "warning"))
        tab.goto(f"{serve(str(SITE))}/{page}#{fragment}", wait_until="load")
        tab.wait_for_function(ready, timeout=60_000)
        tab.locator(token).nth(3).click()
        widths = tab.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        theme = tab.evaluate("() => document.documentElement.dataset.theme")
        context.close()
        assert widths[0] <= widths[1], f"{page} at {width} px pans sideways: {widths}"
        assert theme == ("dark" if dark else "light")
        assert not outside and not errors, (page, outside, errors)


def test_the_bars_show_the_most_probable_the_written_one_and_the_rest_in_one_line(browser):
    """page.js's barsHtml (both pages): the ``BARS`` most probable tokens a bar each; the written
    token, if it ranks lower, its bar after them with its rank; the others summed in one line,
    so that what is shown adds up to 1."""
    from browser_support import script_tab

    context, tab, outside, errors = script_tab(browser, SITE / "_static", {"Page": "playground/page.js"})
    shown = tab.evaluate("""() => {
      const kept = Array.from({length: 30}, (_, i) => ({id: i, p: 2 * (30 - i) / (30 * 31)}));
      const read = (html) => {
        const list = document.createElement("ol");
        list.innerHTML = html;
        return {
          tokens: [...list.querySelectorAll("li[data-token]")].map((li) => Number(li.dataset.token)),
          chosen: [...list.querySelectorAll("li[data-chosen]")].map((li) => li.innerText),
          rest: [...list.querySelectorAll("li[data-rest]")].map((li) =>
            [Number(li.dataset.rest), Number(li.dataset.probability), li.innerText]),
          total: [...list.querySelectorAll("li[data-probability]")]
            .reduce((sum, li) => sum + Number(li.dataset.probability), 0),
        };
      };
      const label = (id) => String(id);
      return {
        low: read(Page.barsHtml(kept, label, 20, "poet", {noun: "character"})),
        high: read(Page.barsHtml(kept, label, 3, "pg")),
        few: read(Page.barsHtml(kept.slice(0, 4), label, 1, "pg")),
        bars: Page.BARS,
        ordinals: [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112].map(Page.ordinal),
      };
    }""")
    context.close()
    assert shown["bars"] == BARS
    low, high, few = shown["low"], shown["high"], shown["few"]
    assert low["tokens"] == [*range(10), 20] and low["chosen"][0].endswith("(chosen, 21st)")
    assert [count for count, *_ in low["rest"]] == [19] and "the other 19 characters" in low["rest"][0][2]
    assert high["tokens"] == list(range(10)) and high["chosen"][0].endswith("(chosen)")
    assert [count for count, *_ in high["rest"]] == [20] and "the other 20 tokens" in high["rest"][0][2]
    assert few["tokens"] == [0, 1, 2, 3] and few["rest"] == []
    for case in (low, high):
        assert abs(case["total"] - 1) <= 1e-12, case["total"]
    assert shown["ordinals"] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th", "112th",
    ]  # fmt: skip
    assert not outside and not errors, (outside, errors)
