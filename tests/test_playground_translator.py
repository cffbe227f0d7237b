"""The playground's translator (issue 21): the 8-bit weights, their BLEU, the JavaScript tokenizer.

1. The files (tools/export_playground.py): the package's translator, every matrix in 8 bits
   with a scale per row; within the page's 4 MB; the record of their test-set BLEU is theirs
   (scores recomputed from the recorded translations; a sample translated again) and within
   0.5 of the full model's; the examples are what the page says they are.
2. The English tokenizer in JavaScript (book/_static/playground/tokenizer.js), run in headless
   Chromium: the same token ids as Translator.source_ids on every test sentence and on awkward
   inputs, the same refusals, and the same split of every Unicode character into word,
   punctuation and space.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path

import pytest
import torch

import playground_files
import playground_translator
from browser_support import local_only_tab, script_tab, serve
from notebooks import WEIGHTS_DIR
from transformer_book import Translator, corpus_scores, pretrained_translator, tatoeba_split

REPO_ROOT = Path(__file__).resolve().parents[1]
STATIC = REPO_ROOT / "book" / "_static"
PLAYGROUND = STATIC / "playground"
JSON_PATH = PLAYGROUND / "translator.json"
BLEU_PATH = PLAYGROUND / playground_translator.BLEU_FILE
CHAPTER_14_RECORD = WEIGHTS_DIR / "tatoeba_en_zh_runs.json"
SAMPLE = range(0, 1000, 50)  # 20 test sentences translated again


@pytest.fixture(scope="module")
def test_set():
    return tatoeba_split("test")


@pytest.fixture(scope="module")
def shipped():
    translator, _ = pretrained_translator()
    return translator


@pytest.fixture(scope="module")
def exported():
    """The 8-bit file loaded into the package's model, as a Translator; its metadata."""
    model, meta = playground_files.load_model(JSON_PATH)
    translator, _ = pretrained_translator()
    return Translator(
        model, translator.bpe.merges, translator.source_vocab, translator.target_vocab,
        translator.config,
    ), meta  # fmt: skip


@pytest.fixture(scope="module")
def record():
    return json.loads(BLEU_PATH.read_text(encoding="utf-8"))


# --- 1. The files ------------------------------------------------------------------------


def test_the_task_fits_in_4_mb():
    manifest = json.loads((PLAYGROUND / "manifest.json").read_text(encoding="utf-8"))
    task = {entry["name"]: entry for entry in manifest["tasks"]}["translator"]
    sizes = (PLAYGROUND / "translator.bin").stat().st_size, JSON_PATH.stat().st_size
    assert (task["bytes"], task["json_bytes"]) == sizes
    assert sum(sizes) <= playground_translator.TRANSLATOR_MAX_BYTES == 4_000_000
    print(f"translator: {sizes[0]:,} bytes of weights + {sizes[1]:,} of JSON")


def test_the_weights_are_the_shipped_translator_in_8_bits(shipped, exported):
    model, meta = exported[0].model, exported[1]
    assert meta["weights"]["quantized"] == "int8 rows"
    expected = playground_files.quantized_state(shipped.model)
    ours = model.state_dict()
    assert list(ours) == list(shipped.model.state_dict())
    for name, original in shipped.model.state_dict().items():
        assert torch.equal(ours[name], expected[name]), name
        if original.dim() == 2:  # at most half a step of its row's scale away
            step = original.abs().amax(dim=1, keepdim=True) / 127
            assert ((ours[name] - original).abs() <= step / 2 + 1e-7).all(), name
        else:
            assert torch.equal(ours[name], original), name
    assert meta["tokenizer"]["merges"] == [" ".join(pair) for pair in shipped.bpe.merges]
    assert meta["source_tokens"] == shipped.source_vocab.tokens
    assert meta["target_tokens"] == shipped.target_vocab.tokens


def test_quantize_rows_keeps_each_weight_within_half_a_step():
    weight = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    weight[3] = 0.0  # a zero row gets scale 1, not a division by zero
    q, scales = playground_files.quantize_rows(weight)
    assert q.dtype == torch.int8 and q.abs().max() == 127 and scales[3] == 1
    back = playground_files.dequantize_rows(q, scales)
    assert ((back - weight).abs() <= scales[:, None] / 2 + 1e-7).all()
    assert torch.equal(back[3], torch.zeros(7))


def test_export_quantized_round_trip_and_limit(tmp_path):
    from transformer_book import make_model

    torch.manual_seed(0)
    config = dict(source_vocab=11, target_vocab=13, num_layers=1, d_model=16, d_ff=32,
                  heads=2)  # fmt: skip
    model = make_model(**config).eval()
    meta = {"title": "t", "config": config, "source_tokens": [], "target_tokens": [],
            "pad_id": 0, "start_id": 1, "end_id": 2, "max_source_len": 5,
            "max_new_tokens": 5, "examples": []}  # fmt: skip
    json_path, _bin_path = playground_files.export_quantized(model, meta, "q", tmp_path)
    loaded, _ = playground_files.load_model(json_path)
    expected = playground_files.quantized_state(model)
    for name, value in loaded.state_dict().items():
        assert torch.equal(value, expected[name]), name
    with pytest.raises(ValueError, match=r"q\.bin would be [\d,]+ bytes; the limit is 100"):
        playground_files.export_quantized(model, meta, "q", tmp_path, max_bytes=100)


def test_the_bleu_record_is_of_these_weights(record, test_set):
    data = (PLAYGROUND / "translator.bin").read_bytes()
    assert record["weights_sha256"] == __import__("hashlib").sha256(data).hexdigest()
    assert record["decoding"] == {"beam_size": 4, "length_penalty": 0.6, "batch_size": 1}
    references = [options for _, options in test_set]
    assert record["test_sentences"] == len(test_set) == 1000
    for name, texts in record["translations"].items():
        scores = corpus_scores(texts, references)
        assert {k: round(v, 4) for k, v in scores.items()} == record["scores"][name], name
    # The full model's beam translations are chapter 14's record of the shipped file.
    chapter = json.loads(CHAPTER_14_RECORD.read_text(encoding="utf-8"))
    shipped_beam = chapter["runs"]["smoothing 0.1"]["test"]["shipped beam"]
    assert record["translations"]["full beam"] == shipped_beam
    full, eight = record["scores"]["full beam"]["bleu"], record["scores"]["8-bit beam"]["bleu"]
    assert round(full, 2) == 33.94
    assert abs(full - eight) <= playground_translator.BLEU_LIMIT == 0.5
    # What the page says: beam search scores better than greedy decoding on these sentences.
    assert eight > record["scores"]["8-bit greedy"]["bleu"]
    meta = json.loads(JSON_PATH.read_text(encoding="utf-8"))
    assert meta["test_scores"] == {"sentences": 1000, **record["scores"]}
    print(
        f"test BLEU: 8-bit beam {eight:.2f}, full {full:.2f}; greedy 8-bit "
        f"{record['scores']['8-bit greedy']['bleu']:.2f}, full "
        f"{record['scores']['full greedy']['bleu']:.2f}"
    )


def test_a_sample_of_the_record_translates_again(record, exported, test_set):
    """20 test sentences, beam and greedy, from the file: the recorded translations."""
    translator = exported[0]
    sources = [test_set[index][0] for index in SAMPLE]
    for name, beam_size in (("8-bit beam", 4), ("8-bit greedy", 1)):
        again = translator.translate(sources, beam_size=beam_size, length_penalty=0.6, batch_size=1)
        assert again == [record["translations"][name][index] for index in SAMPLE], name


def test_the_examples_are_test_sentences_and_the_wrong_one_is_said(exported, test_set):
    translator, meta = exported
    references = dict(test_set)
    assert meta["examples"] == list(playground_translator.TRANSLATOR_EXAMPLES)
    outputs = translator.translate(meta["examples"], beam_size=4, length_penalty=0.6, batch_size=1)
    for text, output, answers, right, note in zip(
        meta["examples"], outputs, meta["example_answers"], meta["example_right"],
        meta["example_notes"], strict=True,
    ):  # fmt: skip
        assert answers == references[text]
        assert right == (output in answers)
        assert (note is None) == right, text  # the wrong one says what is wrong
        if not right:
            assert playground_translator.TRANSLATOR_WRONG[text][0] == output
    assert meta["example_right"].count(False) == 1 and meta["example_right"][-1] is False
    assert meta["max_source_len"] == translator.max_tokens == 128  # the page says 128
    page = (REPO_ROOT / "book" / "playground.md").read_text(encoding="utf-8")
    assert re.search(r"\b128 tokens\b", page)  # the limit the page states


# --- 2. The tokenizer in JavaScript ----------------------------------------------------------

AWKWARD = [
    "Hello, world!",
    "Wait... what?!",
    "“Quoted,” she said — twice…",
    "‘single’ quotes",
    "I have 40,000 books.",
    "It costs $5.99 (50% off) at #1.",
    "3.14159",
    "C++ and R&D",
    "I'm sure Tom's dog didn't bark.",
    "y'all",
    "Mr. O'Neil",
    "e.g. U.S.A.",
    "TOM IS HERE",
    "iPhone",
    "McDonald's",
    "ALL-CAPS-WITH-HYPHENS",
    "café",
    "naïve résumé",
    "Zoë",
    "cafe\u0301",
    "\u0301",
    "ß",
    "İstanbul",
    "Ｔｏｍ ｉｓ ｈｅｒｅ",
    "ﬁne",
    "x² and ①",
    "Ⅻ",
    "٣ apples",
    "Ωmega",
    "Москва",
    "Tom\u00a0is\u2003here",
    "tabs\tand\nnewlines",
    "snake_case",
    "\ufeffBOM",
    "zero\u200bwidth",
    "file\x1cseparator",
    "next\x85line",
    "I love 🍕!",
    "😀",
    "👍🏽",
    "我爱你",
    "I love 北京.",
    "",
    "   ",
    "?!",
    "a",
    "A " * 200,
    " ".join(["word"] * 300),
]


def python_ids(translator, sentence: str):
    try:
        return translator.source_ids(sentence)
    except ValueError:
        return "error"


RUN_TOKENIZER = """async ({jsonUrl, inputs}) => {
  const meta = await (await fetch(jsonUrl)).json();
  const tokenizer = TransformerBookTokenizer.fromMeta(meta);
  return inputs.map((text) => {
    const encoded = tokenizer.encode(text);
    return encoded.error ? {error: encoded.error} : {ids: encoded.ids};
  });
}"""


def tokenizer_tab(browser):
    return script_tab(browser, STATIC, {"TransformerBookTokenizer": "playground/tokenizer.js"})


def test_javascript_token_ids_equal_pythons(browser, shipped, test_set):
    inputs = [english for english, _ in test_set] + AWKWARD
    context, tab, outside, errors = tokenizer_tab(browser)
    results = tab.evaluate(RUN_TOKENIZER, {"jsonUrl": "playground/translator.json",
                                           "inputs": inputs})  # fmt: skip
    context.close()
    assert not outside and not errors, (outside, errors)
    refused = []
    for text, result in zip(inputs, results, strict=True):
        expected = python_ids(shipped, text)
        if expected == "error":
            assert "error" in result, (text, result)
            refused.append(f"{text[:20]!r}: {result['error'][:70]}")
        else:
            assert result.get("ids") == expected, text
    assert all(python_ids(shipped, text) != "error" for text, _ in test_set)
    # what the English vocabulary cannot read at all, nothing, and more than 128 tokens
    assert [text for text in AWKWARD if python_ids(shipped, text) == "error"] == [
        "\u0301",
        "ß",
        "Москва",
        "😀",
        "👍🏽",
        "我爱你",
        "",
        "   ",
        "A " * 200,
        " ".join(["word"] * 300),
    ]
    print("refused, as Python refuses:\n  " + "\n  ".join(refused))


CLASSIFY_JS = """() => {
  // For every code point: w (a word character), p (punctuation: a piece of its own), s (space).
  const out = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) { out.push("-"); continue; }
    const pieces = TransformerBookTokenizer.preTokenize("x" + String.fromCodePoint(cp));
    out.push(pieces.length === 2 ? "p" : pieces[0] === "x" ? "s" : "w");
  }
  return out.join("");
}"""


def test_javascript_splits_every_character_as_python(browser):
    """Python's \\w and \\s (str.isalnum, str.isspace) against tokenizer.js's classes, for
    every code point assigned in Python's Unicode version (a newer browser knows more)."""
    from transformer_book import pre_tokenize

    context, tab, _outside, _errors = tokenizer_tab(browser)
    ours = tab.evaluate(CLASSIFY_JS)
    context.close()
    word, space = re.compile(r"\w"), re.compile(r"\s")
    different = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(chr(cp)) == "Cn":
            continue
        character = chr(cp)
        python = "w" if word.match(character) else "s" if space.match(character) else "p"
        if ours[cp] != python:
            different.append(f"U+{cp:04X} {unicodedata.name(character, '?')}: JavaScript {ours[cp]}, Python {python}")
    assert pre_tokenize("x" + "\u3000") == ["x"]  # the classes mean what this test reads
    assert not different, f"{len(different)} differ, e.g. {different[:5]}"
    print(
        f"Unicode {unicodedata.unidata_version} (Python {sys.version.split()[0]}): "
        "every assigned code point splits the same way"
    )


# --- 3. The model in JavaScript, against PyTorch on the same (dequantized) weights ----------

LOGIT_TOLERANCE = 1e-4  # float64 activations against PyTorch's float32; logits reach about 25
PARITY = range(20)  # the first 20 test sentences
# The speed is printed, never asserted: the median of 3 timed runs (after one to warm up).
SPEED_REPEATS = 3

RUN_TRANSLATOR = """async ({inputs, timed, repeats}) => {
  const model = await TransformerBook.loadModel("playground/translator.json");
  const alpha = model.meta.length_penalty;
  const results = inputs.map((text) => {
    const encoded = TransformerBook.encodeText(model, text);
    if (encoded.error) return {error: encoded.error};
    const limit = TransformerBook.maxNewTokens(model, encoded.ids.length);
    const greedy = TransformerBook.greedyDecode(model, encoded.ids, limit);
    const beam = TransformerBook.beamSearch(model, encoded.ids, limit, 4, alpha);
    return {
      ids: encoded.ids,
      limit,
      greedy: greedy.tokens,
      text: TransformerBook.decodeTokens(model, greedy.tokens),
      logits: greedy.steps.map((step) => Array.from(step.logits)),
      beam: beam.tokens,
      beamText: TransformerBook.decodeTokens(model, beam.tokens),
      beamScore: beam.score,
    };
  });
  // Speed: the median of `repeats` runs, after one to warm up.
  const encoded = TransformerBook.encodeText(model, timed);
  const limit = TransformerBook.maxNewTokens(model, encoded.ids.length);
  const median = (run) => {
    run();
    const times = [];
    for (let i = 0; i < repeats; i++) {
      const started = performance.now();
      run();
      times.push(performance.now() - started);
    }
    return times.sort((a, b) => a - b)[Math.floor(repeats / 2)];
  };
  const speed = {
    greedy: median(() => TransformerBook.greedyDecode(model, encoded.ids, limit)),
    beam: median(() => TransformerBook.beamSearch(model, encoded.ids, limit, 4, alpha)),
    tokens: TransformerBook.greedyDecode(model, encoded.ids, limit).tokens.length - 1,
  };
  return {results, speed};
}"""


def translator_tab(browser):
    return script_tab(browser, STATIC, {"TransformerBook": "playground/transformer.js"})


@torch.no_grad()
def test_javascript_translates_as_pytorch(browser, exported, test_set):
    """20 test sentences: logits within LOGIT_TOLERANCE along the greedy output, greedy and
    beam tokens equal; and the speed on a 10-word sentence (printed, never asserted)."""
    from transformer_book import beam_search, greedy_decode, subsequent_mask

    translator, meta = exported
    model = translator.model
    inputs = [test_set[index][0] for index in PARITY]
    timed = next(english for english, _ in test_set if len(english.split()) == 10)
    context, tab, outside, errors = translator_tab(browser)
    answer = tab.evaluate(RUN_TRANSLATOR, {"inputs": inputs, "timed": timed, "repeats": SPEED_REPEATS})
    context.close()
    assert not outside and not errors, (outside, errors)
    worst = 0.0
    for text, result in zip(inputs, answer["results"], strict=True):
        ids = translator.source_ids(text)
        assert result["ids"] == ids, text
        source = torch.tensor([ids])  # (1, source): one sentence, no padding mask
        limit = min(2 * len(ids) + 10, translator.max_tokens - 1)
        assert result["limit"] == limit
        start, end = meta["start_id"], meta["end_id"]
        greedy = greedy_decode(model, source, None, start, limit, end_id=end)
        assert result["greedy"] == greedy[0].tolist(), text
        beam, score = beam_search(model, source, None, start, limit, 4, end, 0.6)
        assert result["beam"] == beam[0].tolist(), text
        assert abs(result["beamScore"] - score.item()) <= LOGIT_TOLERANCE, text
        assert result["beamText"] == translator.translate([text], 4, 0.6, 1)[0]
        decoder_input = greedy[:, :-1]  # (1, steps)
        hidden = model.decode(
            model.encode(source, None), None, decoder_input,
            subsequent_mask(decoder_input.size(1)),
        )  # fmt: skip
        logits = model.generator.proj(hidden)[0].double()  # (steps, vocab)
        ours = torch.tensor(result["logits"], dtype=torch.float64)
        difference = (ours - logits).abs().max().item()
        assert difference <= LOGIT_TOLERANCE, f"{text}: logits differ by {difference:.2e}"
        worst = max(worst, difference)
    speed = answer["speed"]
    print(
        f"\nlargest logit difference over {len(inputs)} sentences: {worst:.2e} "
        f"(tolerance {LOGIT_TOLERANCE:g}; logits up to "
        f"{max(abs(x) for r in answer['results'] for s in r['logits'] for x in s):.1f})"
    )
    print(
        f"speed, {timed!r} ({len(timed.split())} words, {speed['tokens']} tokens out), "
        f"median of {SPEED_REPEATS} in headless Chromium: greedy {speed['greedy']:.0f} ms, "
        f"beam 4 {speed['beam']:.0f} ms"
    )


# --- 4. The built page (_build/html/book/playground.html) -------------------------------------

SITE = Path(__import__("os").environ.get("BOOK_HTML", REPO_ROOT / "_build" / "html"))
PAGE = "book/playground.html"
WATCH_LOADING = """() => {
  window.loadingSeen = [];
  const loading = document.querySelector('#pg-loading');
  new MutationObserver(() => loadingSeen.push(loading.textContent))
    .observe(loading, {childList: true, characterData: true, subtree: true});
}"""


@pytest.mark.parametrize(("width", "dark"), [(1280, False), (390, True)],
                         ids=["laptop-light", "phone-dark"])  # fmt: skip
def test_the_page_translates(browser, exported, width, dark):
    from test_playground import chart_state, wait_for_message

    if not (SITE / PAGE).exists():
        pytest.fail(f"{SITE / PAGE} is not built: run `jupyter-book build .` first")
    translator, meta = exported
    context, tab, outside, errors = local_only_tab(browser, width, dark=dark, console_types=("error", "warning"))
    requested = []
    tab.on("request", lambda request: requested.append(request.url))
    # A link to another task (the page opens on the translator): only that task's model loads.
    tab.goto(f"{serve(str(SITE))}/{PAGE}#task=dates", wait_until="load")
    tab.wait_for_function("() => document.querySelector('#pg-attention svg.marks')")
    assert not [url for url in requested if "translator" in url], "loaded before it was chosen"
    sizes = (PLAYGROUND / "translator.bin").stat().st_size + JSON_PATH.stat().st_size
    option = tab.locator("#pg-task option[value=translator]").inner_text()
    assert option == f"English → 中文 ({sizes / 1e6:.1f} MB)"

    tab.evaluate(WATCH_LOADING)
    tab.select_option("#pg-task", "translator")
    first = meta["examples"][0]
    greedy_text, beam_text, _ = chart_state(tab, first)
    assert [url for url in requested if url.endswith("translator.bin")] != []
    assert len([url for url in requested if url.endswith("translator.bin")]) == 1
    seen = tab.evaluate("() => loadingSeen")
    megabytes = f"{(sizes - JSON_PATH.stat().st_size) / 1e6:.1f} MB"
    assert all(text.startswith("Loading the model's weights: ") for text in seen), seen
    assert seen[-1] == f"Loading the model's weights: {megabytes} of {megabytes}…", seen
    assert tab.locator("#pg-loading").is_hidden()
    assert greedy_text == translator.translate([first], beam_size=1, batch_size=1)[0]
    assert beam_text == translator.translate([first], 4, 0.6, 1)[0]
    answer = tab.locator("#pg-answer").inner_text()
    assert "Tatoeba's translation" in answer
    assert "。." not in answer, answer  # a sentence that ends in 。 gets no second full stop
    assert tab.locator("#pg-beam-title").inner_text() == ("Beam search (4 beams, length penalty α = 0.6)")
    assert tab.locator("#pg-greedy-steps tbody tr").count() == len(greedy_text) + 1  # + </s>

    wrong = meta["examples"][meta["example_right"].index(False)]
    tab.locator("#pg-examples button", has_text=wrong).click()
    chart_state(tab, wrong)
    assert "The model gets this one wrong: it says" in tab.locator("#pg-answer").inner_text()

    box = tab.locator("#pg-input")
    for text, start in [
        ("", "type an English sentence"),
        ("😀", 'nothing to translate: the English vocabulary knows none of "😀"'),
        ("我爱你", 'nothing to translate: the English vocabulary knows none of "我"'),
        (" ".join(["word"] * 300), "too long: 300 tokens; the model reads at most 128"),
    ]:
        box.fill(text)
        message = wait_for_message(tab, start)
        assert tab.locator("#pg-results").is_hidden(), text
        if text == "我爱你":
            assert message.endswith("This box takes English; the model writes the Chinese.")
    box.fill("")
    box.press_sequentially("I love pizza 🍕")  # one key at a time, as a reader types
    chart_state(tab, "I love pizza 🍕")
    assert tab.locator("#pg-results").is_visible() and tab.locator("#pg-message").is_hidden()
    assert tab.locator("#pg-notice").inner_text() == ('Read as <unk>, unknown to the English vocabulary: "🍕".')
    tab.select_option("#pg-kind", "2")  # cross-attention: English tokens against characters
    tab.wait_for_function("() => document.querySelector('#pg-attention').textContent.includes('1: love</w>')")
    overflow = tab.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth,"
        " document.querySelector('#pg-app').scrollWidth,"
        " document.querySelector('#pg-app').clientWidth]"
    )
    theme = tab.evaluate("() => document.documentElement.dataset.theme")
    context.close()
    assert overflow[0] <= overflow[1] and overflow[2] <= overflow[3], f"pans: {overflow}"
    assert theme == ("dark" if dark else "light")
    assert not outside, f"the page asked for outside URLs: {outside}"
    assert not errors, f"the page logged: {errors}"
