"""Links that open a state (issue 36): the playground pages keep their state in the URL's hash.

On the built pages (_build/html/book/playground.html and playground_poems.html), in headless
Chromium served on 127.0.0.1 only:

1. Each documented hash (book/contributing.md lists them; chapters link to them) opens the page
   in that state: it loads the weights it needs and runs, and shows what the same settings
   give when set by hand; reading the state back gives the hash's values.
2. Changing a control updates the hash.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, quote

import pytest

from browser_support import hash_of, local_only_tab, page_url, wait_for_translation
from notebooks import chapters, sources

REPO_ROOT = Path(__file__).resolve().parents[1]
PLAYGROUND = REPO_ROOT / "book" / "_static" / "playground"
TRANSLATOR_PAGE = "book/playground.html"
POEM_PAGE = "book/playground_poems.html"
CONSOLE = ("error", "warning")


def example(task: str, index: int = 1) -> str:
    return json.loads((PLAYGROUND / f"{task}.json").read_text(encoding="utf-8"))["examples"][index]


# --- 1. The translator page ---------------------------------------------------------------

TRANSLATOR_STATES = [  # (task, text, beam, the attention map: kind, layer, head)
    ("translator", example("translator", 1), "4", "cross", "1", "2"),
    ("dates", example("dates", 1), "2", "encoder", "0", "3"),
    ("numbers", example("numbers", 1), "6", "decoder", "1", "0"),
]
KIND_TITLES = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
               "cross": "decoder cross-attention"}  # fmt: skip


def translated(tab, text: str) -> dict:
    wait_for_translation(tab, text)
    return tab.evaluate("""() => ({
      task: document.querySelector('#pg-task').value,
      text: document.querySelector('#pg-input').value,
      beam: document.querySelector('#pg-beam-size').value,
      kind: document.querySelector('#pg-kind').value,
      layer: document.querySelector('#pg-layer').value,
      head: document.querySelector('#pg-head').value,
      greedy: document.querySelector('#pg-greedy-text').textContent,
      beamText: document.querySelector('#pg-beam-text').textContent,
      beamTitle: document.querySelector('#pg-beam-title').textContent,
      map: document.querySelector('#pg-attention svg').getAttribute('aria-label'),
    })""")


@pytest.mark.parametrize("state", TRANSLATOR_STATES, ids=[s[0] for s in TRANSLATOR_STATES])
def test_a_translator_hash_opens_its_state(browser, state):
    task, text, beam, kind, layer, head = state
    fragment = f"task={task}&text={quote(text)}&beam={beam}&attn={kind}&layer={layer}&head={head}"
    context, tab, outside, errors = local_only_tab(browser, console_types=CONSOLE)
    tab.goto(f"{page_url(TRANSLATOR_PAGE)}#{fragment}", wait_until="load")
    opened = translated(tab, text)
    back = hash_of(tab)

    # The same state set by hand, on the page opened without a hash.
    tab.goto(page_url(TRANSLATOR_PAGE), wait_until="load")
    translated(tab, example("translator", 0))  # the page opens on the translator
    if task != "translator":
        tab.select_option("#pg-task", task)
        translated(tab, example(task, 0))
    tab.select_option("#pg-beam-size", beam)
    tab.locator("#pg-input").fill(text)
    tab.select_option("#pg-kind", str(list(KIND_TITLES).index(kind)))
    tab.select_option("#pg-layer", layer)
    tab.select_option("#pg-head", head)
    tab.wait_for_function(
        "(title) => document.querySelector('#pg-attention svg')?.getAttribute('aria-label') === title",
        arg=opened["map"],
        timeout=60_000,
    )
    by_hand = translated(tab, text)
    by_hand_hash = hash_of(tab)
    context.close()
    assert opened == by_hand
    assert opened["map"] == f"{KIND_TITLES[kind]}, layer {layer}, head {head}"
    assert opened["beamTitle"].startswith(f"Beam search ({beam} beams")
    wanted = {"task": task, "text": text, "beam": beam, "attn": kind, "layer": layer, "head": head}
    assert back == wanted, "reading the state back"
    assert by_hand_hash == wanted, "the controls set by hand wrote the same hash"
    assert not outside, f"the page asked for outside URLs: {outside}"
    assert not errors, f"the page logged: {errors}"


def test_the_translator_hash_matches_the_package(browser):
    """The documented translator link shows the package's own greedy and beam translations."""
    import playground_files
    from transformer_book import Translator, pretrained_translator

    model, _ = playground_files.load_model(PLAYGROUND / "translator.json")
    shipped, _ = pretrained_translator()
    translator = Translator(model, shipped.bpe.merges, shipped.source_vocab,
                            shipped.target_vocab, shipped.config)  # fmt: skip
    text = example("translator", 1)
    context, tab, outside, errors = local_only_tab(browser, console_types=CONSOLE)
    tab.goto(f"{page_url(TRANSLATOR_PAGE)}#task=translator&text={quote(text)}&beam=4",
             wait_until="load")  # fmt: skip
    opened = translated(tab, text)
    context.close()
    assert opened["greedy"] == translator.translate([text], beam_size=1, batch_size=1)[0]
    assert opened["beamText"] == translator.translate([text], 4, 0.6, 1)[0]
    assert not outside and not errors, (outside, errors)


def test_changing_a_translator_control_updates_the_hash(browser):
    context, tab, outside, errors = local_only_tab(browser, console_types=CONSOLE)
    tab.goto(page_url(TRANSLATOR_PAGE), wait_until="load")
    first = example("translator", 0)
    translated(tab, first)
    seen = [hash_of(tab)]
    tab.select_option("#pg-head", "1")
    seen.append(hash_of(tab))
    tab.select_option("#pg-kind", "0")
    seen.append(hash_of(tab))
    typed = example("translator", 2)
    tab.locator("#pg-input").fill(typed)
    translated(tab, typed)
    seen.append(hash_of(tab))
    tab.select_option("#pg-beam-size", "3")
    tab.wait_for_function("() => location.hash.includes('beam=3')")
    seen.append(hash_of(tab))
    context.close()
    assert seen[0]["task"] == "translator" and seen[0]["text"] == first
    assert seen[1]["head"] == "1"
    assert seen[2]["attn"] == "encoder"
    assert seen[3]["text"] == typed
    assert seen[4]["beam"] == "3"
    assert not outside and not errors, (outside, errors)


def test_every_translator_state_survives_a_reload(browser):
    """Sampling settings, a forced path, the open step and the unfolded query are in the link:
    the page reopened from it shows the same outputs, bars and query."""
    context, tab, outside, errors = local_only_tab(browser, console_types=CONSOLE)
    text = example("translator", 1)
    tab.goto(f"{page_url(TRANSLATOR_PAGE)}#task=translator&text={quote(text)}", wait_until="load")
    translated(tab, text)
    for selector, value in [("#pg-temperature", "1.3"), ("#pg-top-k", "20"),
                            ("#pg-top-p", "0.9"), ("#pg-seed", "5")]:  # fmt: skip
        tab.locator(selector).fill(value)
    tab.wait_for_function("() => location.hash.includes('seed=5')")
    tab.select_option("#pg-query", "1")
    tab.locator("#pg-greedy-tokens .pg-token").nth(1).click()
    tab.wait_for_function("() => document.querySelector('#pg-bars').dataset.drawn"
                          "?.startsWith('pg-greedy|1|1.3|0.9|20')")  # fmt: skip
    tab.locator("#pg-bars [data-force]").first.click()  # what if: the second-best token
    tab.wait_for_function("() => !document.querySelector('#pg-greedy-original').hidden "
                          "&& document.querySelector('#pg-bars').dataset.drawn")  # fmt: skip
    view_js = """() => ({
      greedy: document.querySelector('#pg-greedy-text').textContent,
      original: document.querySelector('#pg-greedy-original-text').textContent,
      forced: [...document.querySelectorAll('#pg-greedy-tokens [data-forced]')]
        .map((b) => b.getAttribute('aria-label')),
      sample: document.querySelector('#pg-sample-text').textContent,
      title: document.querySelector('#pg-dist-title').textContent,
      query: document.querySelector('#pg-query').value,
      controls: ['#pg-temperature', '#pg-top-k', '#pg-top-p', '#pg-seed']
        .map((s) => document.querySelector(s).value),
    })"""
    tab.wait_for_function("() => document.querySelector('#pg-sample-text').textContent")
    before = tab.evaluate(view_js)
    link = hash_of(tab)
    url = tab.url
    tab.goto("about:blank")
    tab.goto(url, wait_until="load")
    tab.wait_for_function("() => !document.querySelector('#pg-greedy-original').hidden "
                          "&& document.querySelector('#pg-sample-text').textContent "
                          "&& !document.querySelector('#pg-distribution').hidden "
                          "&& document.querySelector('#pg-drill').dataset.drawn",
                          timeout=60_000)  # fmt: skip
    after = tab.evaluate(view_js)
    context.close()
    assert after == before
    assert before["greedy"] != before["original"].split("Without forcing: ")[1]
    assert before["forced"] == [before["forced"][0]] and before["forced"][0].startswith("step 2 (forced): ")
    assert before["title"].startswith("Step 2 of greedy decoding (forced)")
    assert before["controls"] == ["1.3", "20", "0.9", "5"]
    assert {k: link[k] for k in ("temperature", "top_k", "top_p", "seed", "step", "query")} == {
        "temperature": "1.3",
        "top_k": "20",
        "top_p": "0.9",
        "seed": "5",
        "step": "greedy.2",
        "query": "1",
    }
    assert link["force"].startswith("greedy.") and link["force"].endswith("*")
    assert not outside and not errors, (outside, errors)


# --- 2. The poem page ---------------------------------------------------------------------

POEM_STATES = [  # the documented hashes: a 藏头诗 and a first verse to continue
    {"mode": "acrostic", "prompt": "春花秋月", "temperature": "0.8", "top_p": "0.9", "seed": "3"},
    {"mode": "continue", "prompt": "白日依山尽，", "temperature": "1.5", "top_p": "0.95", "seed": "7"},
]


def poem_written(tab, after: str | None = None) -> str:
    """The poem, once written; ``after``: a poem numbered after that one (data-number)."""
    tab.wait_for_function(
        "(after) => document.querySelector('#poet-poem').dataset.done === '1' && "
        "Number(document.querySelector('#poet-poem').dataset.number) > Number(after ?? -1)",
        arg=after,
        timeout=60_000,
    )
    return tab.locator("#poet-poem").get_attribute("data-text")


@pytest.mark.parametrize("state", POEM_STATES, ids=[s["mode"] for s in POEM_STATES])
def test_a_poem_hash_opens_its_state(browser, state):
    fragment = "&".join(f"{key}={quote(value)}" for key, value in state.items())
    context, tab, outside, errors = local_only_tab(browser, console_types=CONSOLE)
    tab.goto(f"{page_url(POEM_PAGE)}#{fragment}&layer=1&head=2", wait_until="load")
    opened = poem_written(tab)  # no button pressed: the link loads the poet and writes
    back = hash_of(tab)
    drawn = tab.locator("#poet-attention svg").get_attribute("aria-label")

    tab.goto(page_url(POEM_PAGE), wait_until="load")  # the same settings, by hand
    poem_written(tab)  # the page writes its prepared poem as it opens
    tab.locator("#poet-acrostic" if state["mode"] == "acrostic" else "#poet-continue").check()
    tab.locator("#poet-prompt").fill(state["prompt"])
    tab.locator("#poet-temperature").fill(state["temperature"])
    tab.locator("#poet-top-p").fill(state["top_p"])
    tab.locator("#poet-seed").fill(state["seed"])
    before = tab.locator("#poet-poem").get_attribute("data-number")
    tab.locator("#poet-write").click()
    by_hand = poem_written(tab, after=before)
    by_hand_hash = hash_of(tab)
    context.close()
    assert opened == by_hand, "the link wrote another poem than the same settings by hand"
    assert back == {**state, "layer": "1", "head": "2"}, "reading the state back"
    assert {key: by_hand_hash[key] for key in state} == state
    assert drawn.startswith("Attention weights of layer 1, head 2"), drawn
    if state["mode"] == "continue":
        assert opened.startswith(state["prompt"])
    else:
        # each verse (after a ，, 。 or ？) opens with the next given character
        starts = [opened[0]] + [opened[i + 1] for i, c in enumerate(opened[:-1]) if c in "，。？"]
        assert "".join(starts[: len(state["prompt"])]) == state["prompt"], opened
    assert not outside, f"the page asked for outside URLs: {outside}"
    assert not errors, f"the page logged: {errors}"


def test_the_poem_link_follows_the_poem_not_the_controls(browser):
    """The link names the poem on the page: editing a control changes it only once a poem is
    written with it; exploring the bars (their own temperature and top-p) never changes it;
    the open step, the attention map and its query are added to it."""
    context, tab, outside, errors = local_only_tab(browser, console_types=CONSOLE)
    tab.goto(page_url(POEM_PAGE), wait_until="load")
    poem_written(tab)
    seen = [hash_of(tab)]
    tab.locator("#poet-temperature").fill("1.5")
    tab.locator("#poet-continue").check()
    tab.locator("#poet-seed").fill("12")
    seen.append(hash_of(tab))  # nothing written yet: the link is the shown poem's
    tab.locator("#poet-poem .poet-token").nth(2).click()
    tab.wait_for_function("() => document.querySelector('#poet-bars').dataset.kept")
    seen.append(hash_of(tab))
    tab.locator("#poet-bars-temperature").fill("1.9")
    tab.locator("#poet-bars-top-p").fill("0.5")
    tab.wait_for_function("() => document.querySelector('#poet-bars').dataset.temperature"
                          " === '1.9'")  # fmt: skip
    seen.append(hash_of(tab))
    tab.select_option("#poet-head", "1")
    seen.append(hash_of(tab))
    before = tab.locator("#poet-poem").get_attribute("data-number")
    tab.locator("#poet-prompt").fill("明月")
    tab.locator("#poet-write").click()
    poem_written(tab, after=before)
    seen.append(hash_of(tab))
    context.close()
    assert seen[0] == {"mode": "acrostic", "prompt": "春花秋月", "temperature": "0.8",
                       "top_p": "0.9", "seed": "0", "layer": "3", "head": "0"}  # fmt: skip
    assert seen[1] == seen[0]
    assert seen[2] == {**seen[0], "step": "3"}
    assert seen[3] == seen[2], "exploring the bars changed the link"
    assert seen[4] == {**seen[2], "head": "1"}
    assert {k: seen[5][k] for k in ("mode", "prompt", "temperature", "seed")} == {
        "mode": "continue",
        "prompt": "明月",
        "temperature": "1.5",
        "seed": "12",
    }
    assert "step" not in seen[5]
    assert not outside and not errors, (outside, errors)


def test_every_poem_state_survives_a_reload(browser):
    """A forced character, the open step and the unfolded query are in the link: reopened, the
    page writes the same forced poem, keeps the poem without forcing beside it and opens the
    same step and query."""
    context, tab, outside, errors = local_only_tab(browser, console_types=CONSOLE)
    tab.goto(page_url(POEM_PAGE), wait_until="load")
    poem_written(tab)
    tab.locator("#poet-poem .poet-token").nth(3).click()
    tab.wait_for_function("() => document.querySelector('#poet-bars').dataset.kept")
    before_number = tab.locator("#poet-poem").get_attribute("data-number")
    tab.locator("#poet-bars [data-force]").nth(1).click()
    poem_written(tab, after=before_number)
    tab.wait_for_function("() => !document.querySelector('#poet-distribution').hidden")
    tab.select_option("#poet-query", "5")
    view_js = """() => ({
      poem: document.querySelector('#poet-poem').dataset.text,
      original: document.querySelector('#poet-original-text').textContent,
      forced: [...document.querySelectorAll('#poet-poem [data-forced]')]
        .map((t) => t.getAttribute('aria-label')),
      title: document.querySelector('#poet-dist-title').textContent,
      query: document.querySelector('#poet-query').value,
    })"""
    before = tab.evaluate(view_js)
    link = hash_of(tab)
    url = tab.url
    tab.goto("about:blank")
    tab.goto(url, wait_until="load")
    poem_written(tab)
    tab.wait_for_function("() => !document.querySelector('#poet-distribution').hidden "
                          "&& document.querySelector('#poet-drill').dataset.drawn")  # fmt: skip
    after = tab.evaluate(view_js)
    context.close()
    assert after == before
    assert before["forced"][0].startswith("step 4 (forced): ")
    assert before["title"].startswith("Step 4 (forced)")
    assert before["query"] == "5" and link["query"] == "5" and link["step"] == "4"
    assert link["force"].endswith("*") and len(link["force"].split(".")) == 4
    assert not outside and not errors, (outside, errors)


# --- 3. The links in the chapters ---------------------------------------------------------

CHAPTER_LINK = re.compile(r'href="(playground(?:_poems)?\.html)#([^"]+)"')


def chapter_links() -> list[tuple[str, str, str]]:
    """(chapter, page, fragment) for every link from a chapter to a playground state."""
    found = []
    for chapter in chapters():
        for text in sources(chapter, "markdown"):
            found += [(chapter.stem, page, fragment) for page, fragment in CHAPTER_LINK.findall(text)]
    return found


def test_chapters_link_to_prepared_states():
    linked = {chapter for chapter, _, _ in chapter_links()}
    chapters_linked = {"02_scaled_dot_product_attention", "03_multi_head_attention", "06_masking"}
    chapters_linked |= {"07_cross_attention", "10_decoding", "11_inside_the_model", "14_translating"}
    assert chapters_linked | {"15_writing_poems"} <= linked, linked


@pytest.mark.parametrize("link", chapter_links(), ids=lambda link: f"{link[0]}:{link[2][:30]}")
def test_a_chapter_link_opens_its_state(browser, link):
    _, page, fragment = link
    wanted = dict(parse_qsl(fragment))
    context, tab, outside, errors = local_only_tab(browser, console_types=CONSOLE)
    tab.goto(f"{page_url('book/' + page)}#{fragment}", wait_until="load")
    if page == "playground.html":
        opened = translated(tab, wanted["text"])
        assert opened["task"] == wanted["task"]
        assert opened["greedy"] and opened["beamText"], opened
    else:
        poem = poem_written(tab)  # the link loads the poet and writes, no button pressed
        assert poem, "no poem written"
    if "query" in wanted:  # the drill-down opens on its query once the attention map is drawn
        tab.wait_for_function("() => new URLSearchParams(location.hash.slice(1)).has('query')")
    back = hash_of(tab)
    context.close()
    assert {key: back.get(key) for key in wanted} == wanted, "the page did not keep the link's state"
    assert not outside, f"the page asked for outside URLs: {outside}"
    assert not errors, f"the page logged: {errors}"
