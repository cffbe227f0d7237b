"""The poem page of the playground: its files, its JavaScript GPT against PyTorch, the page.

1. The exporter (tools/export_poet_playground.py): the files of each poet (the base poet and the
   one DPO taught) are the shipped weights, bit for bit; exporting again gives the same bytes;
   --check fails when a file changes; the page downloads at most 4 MB for a poet; the rates it
   quotes are the record's, and the record's scope (seeds, temperature, top-p) is checked by
   writing its first samples again; the rhyme table is chapter 19's.
2. Parity: book/_static/playground/gpt.js, run in headless Chromium, against the package's GPT
   loaded from the same file (both shipped poets, and a small random GPT of another
   configuration): logits within ``TOLERANCE`` of PyTorch's float32 model, the attention maps too, greedy poems token for token those of ``Poet.write`` at temperature 0,
   藏头 verses opening with their characters, top-p and top-k as the package's, unknown
   characters named. The page's rhyme checker (poet-rhyme.js) against chapter 19's
   rhyme_characters, rhymes and repeats_rhyme on the records' poems, real ones and made ones.
3. The built page (BOOK_HTML, default _build/html): the weights load only when asked, the poem
   appears, the attention map draws; at 390 px in the dark theme nothing pans sideways.
Everything is served on 127.0.0.1; any other request is refused and fails the test. Timings
are printed (characters per second), never asserted.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml

import export_poet_playground as exporter
from browser_support import hash_of, local_only_tab, page_url, script_tab, serve
from transformer_book import VERSE

REPO_ROOT = Path(__file__).resolve().parents[1]
STATIC = REPO_ROOT / "book" / "_static"
PLAYGROUND = STATIC / "playground"
JSON_PATH = PLAYGROUND / "poet.json"
JSON_PATHS = {stage: PLAYGROUND / f"{poet['name']}.json" for stage, poet in exporter.POETS.items()}
SITE = Path(os.environ.get("BOOK_HTML", REPO_ROOT / "_build" / "html"))
PAGE = "book/playground_poems.html"


@pytest.fixture(scope="module")
def exported():
    """The committed files of the base poet, loaded into the package's Poet."""
    return exporter.load_poet(JSON_PATH)


@pytest.fixture(scope="module", params=list(exporter.POETS))
def each_poet(request, exported):
    """(stage, the Poet loaded from the committed files, their metadata) of each poet."""
    if request.param == "base":
        return ("base", *exported)
    return (request.param, *exporter.load_poet(JSON_PATHS[request.param]))


# --- 1. The exporter ------------------------------------------------------------------


def test_the_files_are_the_shipped_weights(each_poet, exported):
    from transformer_book import preference_record, pretrained_poet

    stage, poet, meta = each_poet
    shipped = pretrained_poet(stage=stage)
    assert meta["stage"] == stage and meta["name"] == exporter.POETS[stage]["name"]
    assert poet.vocab.tokens == shipped.vocab.tokens == meta["tokens"] == exported[1]["tokens"]
    ours, theirs = poet.model.state_dict(), shipped.model.state_dict()
    assert list(ours) == list(theirs)
    for name in theirs:
        assert torch.equal(ours[name], theirs[name]), name
    assert poet.model.config == shipped.model.config == exported[0].model.config
    _, raw = exporter.read_shipped(stage=stage)
    assert meta["source"]["sha256"] == hashlib.sha256(raw).hexdigest()
    # float16, each tensor once: two bytes per parameter
    count = sum(p.numel() for p in shipped.model.parameters())
    assert meta["weights"]["bytes"] == 2 * count == (PLAYGROUND / meta["weights"]["file"]).stat().st_size
    if stage == "base":
        history = json.loads((exporter.WEIGHTS_DIR / exporter.HISTORY_FILE).read_text("utf-8"))
        assert meta["training"]["held_out_perplexity"] == history["held_out_perplexity"]
        assert meta["training"]["steps"] == len(history["losses"])
    else:
        record = preference_record(stage)
        assert meta["training"]["steps"] == len(record["history"]) == record["training"]["steps"]
        assert meta["training"]["held_out_perplexity"] == record["tuned"]["held_out_perplexity"]
    if stage != "base":  # another poet: other weights
        assert not torch.equal(
            ours["tokens.lookup.weight"],
            exported[0].model.state_dict()["tokens.lookup.weight"],
        )


@pytest.mark.parametrize("stage", list(exporter.POETS))
def test_the_page_downloads_at_most_4_mb_a_poet(stage):
    meta = json.loads(JSON_PATHS[stage].read_text("utf-8"))
    total = (PLAYGROUND / meta["weights"]["file"]).stat().st_size + JSON_PATHS[stage].stat().st_size
    print(f"{meta['weights']['file']} + {JSON_PATHS[stage].name}: {total:,} bytes")
    assert total <= exporter.MAX_BYTES == 4_000_000


def test_the_quoted_rates_are_the_records_with_their_scope(exported):
    """The rates the page quotes are tools/train_grpo.py's record; its scope (200 poems, seeds
    0-199, T 0.8, top-p 0.9) is checked by writing the record's first samples again."""
    from transformer_book import preference_record, pretrained_poet

    record = preference_record("dpo")
    measured = exported[1]["measured"]
    assert json.loads(JSON_PATHS["dpo"].read_text("utf-8"))["measured"] == measured  # the same in both
    for stage, key in (("base", "base"), ("dpo", "tuned")):
        assert measured[stage] == {name: record[key][name] for name in exporter.MEASURES}
        assert measured[stage]["poems"] == 200
    assert measured["seeds"] == [0, 199] and (
        measured["temperature"],
        measured["top_p"],
    ) == (0.8, 0.9)
    for stage, key in (("base", "base"), ("dpo", "tuned")):
        poet = pretrained_poet(stage=stage)
        for seed in (0, 1):  # the record's samples are its poems of seeds 0, 1, ...
            poem = poet.write(temperature=measured["temperature"], top_p=measured["top_p"], seed=seed)
            assert poem == record[key]["samples"][seed], (stage, seed)


def test_the_rhyme_table_is_chapter_19s(exported):
    from transformer_book import rhyme_class

    _, meta = exported
    classes = meta["rhyme"]["classes"]
    owner = {c: name for name, characters in classes.items() for c in characters}
    assert sum(map(len, classes.values())) == len(owner)  # each character in one class at most
    for token in meta["tokens"][3:]:
        assert owner.get(token) == rhyme_class(token), token
    assert json.loads(JSON_PATHS["dpo"].read_text("utf-8"))["rhyme"] == meta["rhyme"]


def test_export_is_deterministic_and_check_sees_a_change(tmp_path):
    first = exporter.export(tmp_path / "one")
    second = exporter.export(tmp_path / "two")
    assert [path.name for path in first] == [
        "poet.json",
        "poet.bin",
        "poet_dpo.json",
        "poet_dpo.bin",
    ]
    for one, two in zip(first, second, strict=True):
        assert one.read_bytes() == two.read_bytes(), one.name
    assert exporter.check() == []  # the committed files are the tool's
    assert exporter.main(["--check"]) == 0
    # A changed weight, or a changed JSON, of either poet is caught; so is a missing file.
    out = tmp_path / "one"
    for name in ("poet.bin", "poet_dpo.bin"):
        data = bytearray((out / name).read_bytes())
        data[1000] ^= 1
        (out / name).write_bytes(bytes(data))
    assert exporter.check(out) == ["poet.bin", "poet_dpo.bin"]
    assert exporter.main(["--check", "--out", str(out)]) == 1
    (out / "poet.json").write_text((out / "poet.json").read_text("utf-8").replace("写诗", "作诗"), encoding="utf-8")
    assert exporter.check(out) == ["poet.json", "poet.bin", "poet_dpo.bin"]
    (out / "poet_dpo.json").unlink()
    assert exporter.check(out) == [
        "poet.json",
        "poet.bin",
        "poet_dpo.json",
        "poet_dpo.bin",
    ]


def test_exporter_refuses_an_unknown_poet(tmp_path):
    with pytest.raises(ValueError, match="stage must be one of \\['base', 'dpo'\\]; got 'rlhf'"):
        exporter.export_poet("rlhf", tmp_path)


def test_loader_refuses_a_damaged_file(tmp_path):
    json_path, bin_path = exporter.export_poet("base", tmp_path)
    data = bytearray(bin_path.read_bytes())
    data[0] ^= 1
    bin_path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="poet.bin does not match"):
        exporter.load_poet(json_path)
    meta = json.loads(json_path.read_text("utf-8"))
    json_path.write_text(json.dumps({**meta, "format": "other/1"}), encoding="utf-8")
    with pytest.raises(ValueError, match="format 'other/1'"):
        exporter.load_poet(json_path)


def test_exporter_refuses_weights_that_are_not_float16(tmp_path):
    with pytest.raises(ValueError, match="w is torch.float32"):
        exporter.tensor_table({"w": torch.zeros(2, 2)})


def test_the_page_prompts_are_in_the_vocabulary(exported):
    poet, meta = exported
    for example in meta["examples"] + meta["parity_prompts"]:
        assert not poet.vocab.unknown(example["prompt"]), example
        if example["acrostic"]:
            assert 1 <= len(example["prompt"]) <= meta["acrostic_max"]
        else:
            assert len(example["prompt"]) <= meta["prompt_max"]


# --- 2. Parity: gpt.js against PyTorch --------------------------------------------------

TOLERANCE = 1e-4  # JavaScript (float64) against PyTorch's float32 model, same weights
TOLERANCE_FLOAT64 = 1e-9  # against the same model computed in float64
WARNINGS_TOO = ("error", "warning")  # the poem page logs neither

HARNESS_MODULES = {
    "PoetGPT": "playground/gpt.js",
    "PoetRhyme": "playground/poet-rhyme.js",
}  # gpt.js imports core.js

RUN_JS = """async ({prompts, file}) => {
  const base64 = (values) => {  // a Float64Array as base64 (fast to pass back)
    const bytes = new Uint8Array(values.buffer);
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000)
      text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(text);
  };
  const started = performance.now();
  const model = await PoetGPT.loadPoet(`playground/${file}`);
  const loadMs = performance.now() - started;
  const results = [];
  let characters = 0, writeMs = 0;
  for (const {prompt, acrostic} of prompts) {
    const options = {temperature: 0, acrostic, keepLogits: true};
    const t0 = performance.now();
    const poem = PoetGPT.write(model, prompt, options);
    writeMs += performance.now() - t0;
    characters += poem.ids.length - 1;
    // The whole poem in one pass, without the cache: the same logits, and every attention map.
    const full = PoetGPT.forward(model, poem.ids, null, 0, true);
    const fullLogits = poem.ids.map((_, row) => PoetGPT.logitsAt(model, full.hidden, row));
    const first = poem.ids.length - options.steps.length;
    let cacheGap = 0;
    options.steps.forEach((step, s) => step.forEach((value, v) => {
      cacheGap = Math.max(cacheGap, Math.abs(value - fullLogits[first + s][v]));
    }));
    const steps = new Float64Array(options.steps.length * model.meta.config.vocab_size);
    options.steps.forEach((step, s) => steps.set(step, s * step.length));
    results.push({
      ids: poem.ids, text: poem.text, steps: base64(steps), cacheGap,
      attention: full.attention.map((heads) => heads.map((m) => Array.from(m.data))),
    });
  }
  return {results, loadMs, writeMs, characters};
}"""


def harness_tab(browser, directory: Path = STATIC, **options):
    """A local-only tab on a page that loads playground/gpt.js (and core.js, whose pieces it
    uses) from ``directory``."""
    return script_tab(browser, directory, HARNESS_MODULES, console_types=WARNINGS_TOO, **options)


@pytest.fixture(scope="module")
def javascript_poems(browser, each_poet):
    """gpt.js's greedy poems (and logits, attention maps) for the file's test prompts, with
    each poet."""
    _, _, meta = each_poet
    prompts = meta["parity_prompts"] + meta["examples"]
    context, tab, outside, errors = harness_tab(browser)
    run = tab.evaluate(RUN_JS, {"prompts": prompts, "file": f"{meta['name']}.json"})
    context.close()
    assert not outside and not errors, (outside, errors)
    rate = run["characters"] / (run["writeMs"] / 1000)
    print(
        f"\ngpt.js: loaded {meta['weights']['file']} in {run['loadMs']:.0f} ms; greedy, with the cache: "
        f"{run['characters']} characters in {run['writeMs']:.0f} ms ({rate:.0f} characters/s)"
    )
    return prompts, run["results"]


@torch.no_grad()
def test_javascript_logits_and_greedy_poems_are_pytorchs(each_poet, javascript_poems):
    stage, poet, meta = each_poet
    vocab = meta["config"]["vocab_size"]
    float64 = copy.deepcopy(poet.model).double()
    worst = worst64 = 0.0
    for example, result in zip(*javascript_poems, strict=True):
        prompt, acrostic = example["prompt"], example["acrostic"]
        # Greedy: token for token the package's Poet.write at temperature 0.
        expected = poet.write(prompt, temperature=0, acrostic=acrostic)
        assert result["text"] == expected, (prompt, result["text"], expected)
        ids = [poet.vocab.boundary_id] + poet.vocab.encode(expected, boundaries=False)
        assert result["ids"] == ids, prompt
        # Logits of every step (decoded with the cache) against one PyTorch pass.
        steps = torch.frombuffer(bytearray(base64.b64decode(result["steps"])), dtype=torch.float64).view(
            -1, vocab
        )  # (steps, vocab)
        first = len(ids) - steps.size(0)  # the position of the first step: <s> + prompt - 1
        tokens = torch.tensor([ids])  # (1, seq)
        for model, bound, kind in (
            (poet.model, TOLERANCE, "float32"),
            (float64, TOLERANCE_FLOAT64, "float64"),
        ):
            logits = model(tokens, need_weights=True)[0, first:].double()  # (steps, vocab)
            difference = (steps - logits).abs().max().item()
            assert difference <= bound, f"{prompt!r}: {kind} logits differ by {difference:.2e}"
            if kind == "float32":
                worst = max(worst, difference)
            else:
                worst64 = max(worst64, difference)
            for index, layer in enumerate(model.layers):  # every attention map of the poem
                theirs = layer.attention_weights[0].flatten(1).double()  # (heads, seq * seq)
                ours = torch.tensor(result["attention"][index], dtype=torch.float64)
                difference = (ours - theirs).abs().max().item()
                assert difference <= bound, (prompt, kind, index, difference)
        assert result["cacheGap"] <= TOLERANCE_FLOAT64, (prompt, result["cacheGap"])
        if acrostic:
            verses = VERSE.findall(result["text"])
            assert [verse[0] for verse in verses] == list(prompt), result["text"]
    print(
        f"{stage} poet: largest logit difference: {worst:.2e} against float32 PyTorch "
        f"(tolerance {TOLERANCE:.0e}), {worst64:.2e} against float64 "
        f"(tolerance {TOLERANCE_FLOAT64:.0e}); {len(javascript_poems[0])} greedy poems "
        "token for token the same"
    )


SAMPLING_JS = """async ({seeds, prompts, probeLogits, tops}) => {
  const model = await PoetGPT.loadPoet("playground/poet.json");
  const t0 = performance.now();
  let characters = 0;
  const poems = [];
  for (const {prompt, acrostic} of prompts) {
    for (const seed of seeds) {
      const poem = PoetGPT.write(model, prompt, {temperature: 0.8, topP: 0.9, seed, acrostic});
      characters += poem.ids.length - 1;
      poems.push({prompt, acrostic, seed, text: poem.text});
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const again = PoetGPT.write(model, "", {temperature: 0.8, topP: 0.9, seed: seeds[0]}).text;
  const topK = PoetGPT.write(model, "", {temperature: 1, topP: 1, topK: 1, seed: 5}).text;
  const greedy = PoetGPT.write(model, "", {temperature: 0}).text;
  // The filters on a step's logits, and the draw's frequencies for a small distribution.
  const filtered = {
    topP: tops.p.map((p) => Array.from(PoetGPT.topPFilter(probeLogits, p), Number.isFinite)),
    topK: tops.k.map((k) => Array.from(PoetGPT.topKFilter(probeLogits, k), Number.isFinite)),
  };
  const random = PoetGPT.randomStream(0);
  const counts = [0, 0, 0, 0];
  const small = Float64Array.from([0.0, 1.0, 2.0, -Infinity]);
  for (let i = 0; i < 20000; i++) counts[PoetGPT.drawToken(small, random)]++;
  const halves = Array.from({length: 65536}, (_, bits) => PoetGPT.halfToNumber(bits));
  return {poems, seconds, characters, again, topK, greedy, filtered, counts,
          halves: halves.map((v) => (Number.isNaN(v) ? "nan" : v))};
}"""


@pytest.fixture(scope="module")
def javascript_sampling(browser, exported):
    poet, _ = exported
    probe = poet.model(torch.tensor([[poet.vocab.boundary_id, poet.vocab.ids["春"]]]))[0, -1]
    tops = {"p": [0.1, 0.5, 0.9, 0.99, 1.0], "k": [1, 5, 40]}
    prompts = [
        {"prompt": "", "acrostic": False},
        {"prompt": "春花秋月", "acrostic": True},
    ]
    context, tab, outside, errors = harness_tab(browser)
    run = tab.evaluate(SAMPLING_JS, {
        "seeds": list(range(20)), "prompts": prompts, "tops": tops,
        "probeLogits": probe.tolist(),
    })  # fmt: skip
    context.close()
    assert not outside and not errors, (outside, errors)
    print(
        f"\ngpt.js sampling (temperature 0.8, top-p 0.9, with the cache): "
        f"{run['characters']} characters in {run['seconds']:.2f} s "
        f"({run['characters'] / run['seconds']:.0f} characters/s)"
    )
    return probe, tops, run


def test_javascript_samples_are_seeded_and_have_the_form(javascript_sampling):
    from transformer_book import regular_form

    _, _, run = javascript_sampling
    free = [p["text"] for p in run["poems"] if not p["acrostic"]]
    acrostics = [p["text"] for p in run["poems"] if p["acrostic"]]
    assert run["again"] == free[0]  # the same seed, the same poem
    assert len(set(free)) == len(free)  # other seeds, other poems
    share = sum(map(regular_form, free)) / len(free)
    acrostic_share = sum(map(regular_form, acrostics)) / len(acrostics)
    print(
        f"regular form: {share:.0%} of {len(free)} free poems, "
        f"{acrostic_share:.0%} of {len(acrostics)} 藏头诗; first: {free[0]}"
    )
    # The package's poet writes the form in at least 95% of its 200 recorded samples;
    # 20 of the page's draws may miss it once or twice, not more.
    assert share >= 0.85
    for poem in acrostics:  # 藏头: verse i opens with the prompt's character i
        assert [verse[0] for verse in VERSE.findall(poem)] == list("春花秋月"), poem
    assert run["topK"] == run["greedy"]  # top-k 1 is greedy, whatever the seed


def test_javascript_top_p_top_k_and_draws_are_the_packages(javascript_sampling):
    from transformer_book import top_p_filter

    probe, tops, run = javascript_sampling
    for p, kept in zip(tops["p"], run["filtered"]["topP"], strict=True):
        theirs = torch.isfinite(top_p_filter(probe, p)).tolist()
        assert kept == theirs, f"top-p {p}: {sum(kept)} kept, the package keeps {sum(theirs)}"
    for k, kept in zip(tops["k"], run["filtered"]["topK"], strict=True):
        kth = probe.topk(k).values[-1]  # sample_next_token keeps ties with the k-th
        assert kept == (probe >= kth).tolist(), f"top-k {k}"
        assert sum(kept) == k
    expected = torch.tensor([0.0, 1.0, 2.0]).softmax(0).tolist() + [0.0]
    frequencies = [count / 20000 for count in run["counts"]]
    assert run["counts"][3] == 0  # a -inf logit is never drawn
    assert all(abs(f - e) < 0.015 for f, e in zip(frequencies, expected)), frequencies
    import numpy as np

    exact = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float64)
    ours = np.array([np.nan if v == "nan" else v for v in run["halves"]], dtype=np.float64)
    assert np.array_equal(ours, exact, equal_nan=True)  # every float16, exactly


NAMES_JS = """async ({cases}) => {
  const model = await PoetGPT.loadPoet("playground/poet.json");
  return cases.map(([prompt, acrostic]) => {
    const checked = PoetGPT.checkPrompt(model, prompt, acrostic);
    let thrown = null;
    try { PoetGPT.write(model, prompt, {acrostic}); } catch (error) { thrown = error.message; }
    return {error: checked.error ?? null, thrown};
  });
}"""


def test_javascript_names_unknown_characters(browser, exported):
    poet, _ = exported
    cases = [
        ["春A花😀A", False],
        ["abc", True],
        ["春花秋月夜", True],
        ["", True],
        ["白日依山尽，黄河入海流。", False],
        [" 春 ", False],
        ["春花", True],
    ]
    context, tab, outside, errors = harness_tab(browser)
    results = tab.evaluate(NAMES_JS, {"cases": cases})
    context.close()
    assert not outside and not errors, (outside, errors)
    assert poet.vocab.unknown("春A花😀A") == [
        "A",
        "😀",
    ]  # what the package names, in order
    assert results[0]["error"].startswith('The poet does not know these characters: "A", "😀"')
    assert results[1]["error"].startswith('The poet does not know these characters: "a", "b", "c"')
    assert results[2]["error"] == "A 藏头诗 needs 1 to 4 characters, one per verse; got 5."
    assert results[3]["error"] == "A 藏头诗 needs 1 to 4 characters, one per verse; got 0."
    assert results[4]["error"] == "A first verse has at most 10 characters here; got 12."
    assert results[5]["error"] is None and results[6]["error"] is None  # spaces trimmed
    for result in results:  # write() refuses what checkPrompt refuses, with its message
        assert result["thrown"] == result["error"]


RHYME_JS = """async ({poems}) => {
  const meta = await (await fetch("playground/poet.json")).json();
  const table = PoetRhyme.rhymeTable(meta.rhyme);
  return poems.map((poem) => {
    const {ends, rhymes, repeats, repeated} = PoetRhyme.checkRhyme(table, poem);
    return {ends: ends.map((end) => end.character), at: ends.map((end) => end.at), rhymes,
            repeats, repeated};
  });
}"""

# Made poems: a repeat that rhymes, a repeat that does not, no rhyme, one even verse, a verse
# without its mark, ？, a character outside the Basic Multilingual Plane at a verse's end, marks
# alone, nothing.
MADE_POEMS = [
    "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。",
    "春风吹柳绿，明月照高楼。山水相依处，归人上小楼。",
    "春风吹柳绿，明月照高楼。山水相依处，归人上小楼。江上孤帆远，行人上小楼。",
    "春风吹柳绿，明月照高楼。山水相依处，归人见白云。",
    "春风吹柳绿，明月照高楼。",
    "春风吹柳绿，明月照高楼。山水相依处，归人见白云",
    "春风吹柳绿？明月照高楼？山水相依处？归人上小楼？",
    "春风吹柳绿，明月照高𠜴。山水相依处，归人上小𠜴。",
    "，。，。",
    "",
]


@pytest.fixture(scope="module")
def rhyme_poems(exported):
    """The poems the page's rhyme checker is tried on: every poem sampled in the poets'
    records (the base poet's, the tuned ones'), 400 Tang poems (every 100th of the corpus)
    written in the poet's characters, and MADE_POEMS."""
    from transformer_book import read_poems

    known = set(exported[1]["tokens"][3:])
    poems = []
    for path in sorted(exporter.WEIGHTS_DIR.glob("tang_poet*.json")):
        record = json.loads(path.read_text("utf-8"))
        for part in (record, record.get("base", {}), record.get("tuned", {})):
            for sample in part.get("samples", []):  # an SFT record keeps [prompt, poem, ok]
                poems.append(sample if isinstance(sample, str) else sample[1])
    real = [poem for poem in read_poems()[::100] if set(poem) <= known]
    return poems + real[:400] + MADE_POEMS


def test_the_pages_rhyme_checker_is_chapter_19s(browser, rhyme_poems):
    from transformer_book import repeats_rhyme, rhyme_characters, rhymes

    context, tab, outside, errors = harness_tab(browser)
    results = tab.evaluate(RHYME_JS, {"poems": rhyme_poems})
    context.close()
    assert not outside and not errors, (outside, errors)
    for poem, result in zip(rhyme_poems, results, strict=True):
        ends = rhyme_characters(poem)
        assert result["ends"] == ends, poem
        assert result["rhymes"] == rhymes(poem), poem
        assert result["repeats"] == repeats_rhyme(poem), poem
        assert result["repeated"] == [c for c in dict.fromkeys(ends) if ends.count(c) > 1], poem
        for character, at in zip(ends, result["at"], strict=True):  # where the page marks them
            assert poem[at] == character and poem[at + 1 : at + 2] in (
                "，",
                "。",
                "？",
                "",
            ), (poem, at)
    verdicts = [(r["rhymes"], r["repeats"]) for r in results]
    counts = {verdict: verdicts.count(verdict) for verdict in set(verdicts)}
    print(f"\n{len(rhyme_poems)} poems, (rhymes, repeats): {counts}")
    assert len(counts) == 4  # every verdict was tried
    made = dict(zip(MADE_POEMS, results[-len(MADE_POEMS) :], strict=True))
    assert made[MADE_POEMS[2]]["repeated"] == ["楼"] and made[MADE_POEMS[7]]["ends"] == ["𠜴", "𠜴"]


# --- 3. The built page ----------------------------------------------------------------


UNSEEN_EXAMPLES = ["她", "咖啡"]  # the page's examples of characters the poet never saw


def test_the_page_states_the_download_and_the_tolerance():
    page = (REPO_ROOT / "book" / "playground_poems.md").read_text(encoding="utf-8")
    total = (PLAYGROUND / "poet.bin").stat().st_size + JSON_PATH.stat().st_size
    assert f"({total / 1e6:.1f} MB)" in page, "the download's size"
    # The tolerance, stated in the text and again in the 中文小结, is the one the parity test uses.
    text, summary = page.split("## 中文小结")
    for part in (text, summary):
        stated = {10 ** int(exponent) for exponent in re.findall(r"\$10\^\{(-\d+)\}\$", part)}
        assert stated == {TOLERANCE}, stated
    dpo = json.loads(JSON_PATHS["dpo"].read_text("utf-8"))
    dpo_total = (PLAYGROUND / dpo["weights"]["file"]).stat().st_size + JSON_PATHS["dpo"].stat().st_size
    assert f"(another {dpo_total / 1e6:.1f} MB)" in text, "the DPO poet's download"
    poems = dpo["measured"]["base"]["poems"]  # how many poems each poet's rates are measured on
    assert poems == dpo["measured"]["dpo"]["poems"]
    assert f"on {poems} poems each" in " ".join(text.split()) and f"在 {poems} 首诗上" in summary
    tokens = set(json.loads(JSON_PATH.read_text("utf-8"))["tokens"])
    for word in UNSEEN_EXAMPLES:
        assert word in page and not set(word) & tokens, word


def test_the_toc_lists_the_page_after_the_translator_playground():
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    parts = [[entry["file"] for entry in part["chapters"]] for part in toc["parts"]]
    found = [files for files in parts if "book/playground_poems" in files]
    assert len(found) == 1, "_toc.yml lists book/playground_poems once"
    [files] = found
    assert "book/playground" in files
    assert files.index("book/playground") < files.index("book/playground_poems")


WATCH_JS = """() => {  // every text the poem box shows while it is being written
  window.poemTexts = [];
  new MutationObserver(() => window.poemTexts.push(
    document.querySelector('#poet-poem').textContent)
  ).observe(document.querySelector('#poet-poem'),
            {childList: true, characterData: true, subtree: true});
}"""

DONE_JS = """(key) => document.querySelector('#poet-poem').dataset.done === '1'
  && document.querySelector('#poet-attention').dataset.drawn?.startsWith(key)
  && document.querySelector('#poet-attention svg.marks')"""


def wait_for_poem(tab) -> str:
    tab.wait_for_function(
        "() => document.querySelector('#poet-poem').dataset.done === '1' "
        "&& document.querySelector('#poet-attention svg.marks')",
        timeout=60_000,
    )
    return tab.locator("#poet-poem").get_attribute("data-text")


def write(tab, prompt: str, acrostic: bool, temperature: float, seed: int = 0) -> str:
    tab.check("#poet-acrostic" if acrostic else "#poet-continue")
    tab.fill("#poet-prompt", prompt)
    tab.fill("#poet-temperature", str(temperature))
    tab.fill("#poet-seed", str(seed))
    tab.evaluate("() => { document.querySelector('#poet-poem').dataset.done = ''; }")
    tab.click("#poet-write")
    return wait_for_poem(tab)


def check_attention_and_fit(tab):
    """The attention map follows the layer and head chosen; the page, the app and the chart fit."""
    svg = tab.locator("#poet-attention svg.marks").inner_html()
    key = tab.locator("#poet-attention").get_attribute("data-drawn")
    tab.select_option("#poet-head", "2")
    tab.wait_for_function(
        "(key) => document.querySelector('#poet-attention').dataset.drawn !== key",
        arg=key,
    )
    assert tab.locator("#poet-attention").get_attribute("data-drawn").endswith("|3|2")
    assert tab.locator("#poet-attention svg.marks").inner_html() != svg

    overflow = tab.evaluate(  # the page, the app and the chart in their boxes
        "() => [document.documentElement.scrollWidth,"
        " document.documentElement.clientWidth,"
        " document.querySelector('#poet-app').scrollWidth,"
        " document.querySelector('#poet-app').clientWidth,"
        " document.querySelector('#poet-attention svg').getBoundingClientRect().width,"
        " document.querySelector('#poet-attention').clientWidth]"
    )
    assert all(inside <= box for inside, box in zip(overflow[::2], overflow[1::2])), (
        f"wider than the screen: {overflow}"
    )


@pytest.mark.parametrize(("width", "dark"), [(1280, False), (390, True)])
def test_page_writes_poems(browser, exported, width, dark):
    if not (SITE / "index.html").exists():
        pytest.fail(f"{SITE} has no built book: run `jupyter-book build .` first")
    if not (SITE / PAGE).exists():
        pytest.fail(f"{SITE / PAGE} is not built: is book/playground_poems in _toc.yml?")
    poet, meta = exported
    context, tab, outside, errors = local_only_tab(browser, width, dark=dark, console_types=WARNINGS_TOO, motion=True)
    requested = []
    tab.on("request", lambda request: requested.append(request.url))
    tab.goto(f"{serve(str(SITE))}/{PAGE}", wait_until="load")
    if dark:
        assert tab.evaluate("() => document.documentElement.dataset.theme") == "dark"
    # At once, before any weights arrive: the prepared poem and the controls, no button to press.
    prepared = tab.locator("#poet-poem").get_attribute("data-text")
    prepared_call = tab.locator("#poet-call").inner_text()
    assert tab.locator("#poet-form").is_visible()
    assert tab.locator("#poet-poem").inner_text().replace("\n", "") == prepared
    assert [verse[0] for verse in VERSE.findall(prepared)] == list("春花秋月"), prepared

    # The poet loads as the page opens and writes the same poem with the settings shown.
    weights = ("/poet.json", "/poet.bin")
    first = wait_for_poem(tab)
    assert [url.rsplit("/", 1)[-1] for url in requested if url.endswith(weights)] == [
        "poet.json", "poet.bin"
    ]  # fmt: skip
    status = tab.locator("#poet-status").inner_text()
    assert status.startswith(f"the poet: {meta['weights']['bytes'] / 1e6:.1f} MB"), status
    assert first == prepared, "the prepared poem is not what the poet writes with its settings"
    assert tab.locator("#poet-call").inner_text() == prepared_call
    assert "characters/s" in tab.locator("#poet-timing").inner_text()
    print(f"\n{width} px: {tab.locator('#poet-timing').inner_text()}")
    if width < 1280:  # the phone: what the page shows and how it fits; the behaviour, at 1280 px
        check_attention_and_fit(tab)
        context.close()
        assert not outside and not errors, (outside, errors)
        return
    same = tab.evaluate(
        """async (poem) => {  // the page's poem is gpt.js's, with the page's settings
      const PoetGPT = await import(new URL("../_static/playground/gpt.js", location.href));
      const model = await PoetGPT.loadPoet(new URL("../_static/playground/poet.json",
                                                   location.href).href);
      return PoetGPT.write(model, "春花秋月", {acrostic: true, temperature: 0.8, topP: 0.9,
                                              seed: 0}).text;
    }"""
    )
    assert same == first

    # Greedy continuation of a first verse, one character at a time: the package's poem,
    # character for character.
    tab.evaluate(WATCH_JS)
    greedy = write(tab, "白日依山尽，", acrostic=False, temperature=0)
    shown = list(dict.fromkeys(tab.evaluate("() => window.poemTexts")))
    assert len(shown) >= len(greedy) - 6, f"not character by character: {len(shown)} states"
    assert tab.locator("#poet-timing").inner_text().endswith("shown one every 40 ms.")
    assert greedy == poet.write("白日依山尽，", temperature=0)
    assert "this very poem" in tab.locator("#poet-same").inner_text()
    assert tab.locator("#poet-call").inner_text() == (
        'pretrained_poet().write("白日依山尽，", temperature=0, top_p=0.9, seed=0)'
    )
    # The reader asks for less motion now (the page reads the setting at each poem): the
    # poems below are shown whole, at once.
    tab.emulate_media(reduced_motion="reduce")
    tab.evaluate(WATCH_JS)
    write(tab, "白日依山尽，", acrostic=False, temperature=0)
    assert len(set(tab.evaluate("() => window.poemTexts"))) <= 2, "still animated"
    # Another seed, another poem; the same seed again, the same poem.
    one, two = (write(tab, "", acrostic=False, temperature=0.8, seed=s) for s in (1, 2))
    assert one != two and write(tab, "", acrostic=False, temperature=0.8, seed=1) == one

    # An example button sets the prompt and the mode, and writes.
    tab.evaluate("() => { document.querySelector('#poet-poem').dataset.done = ''; }")
    tab.locator(".poet-example", has_text="明月").click()
    assert wait_for_poem(tab).startswith("明月") and tab.is_checked("#poet-continue")
    tab.evaluate("() => { document.querySelector('#poet-poem').dataset.done = ''; }")
    tab.locator(".poet-example", has_text="山高水长").click()
    poem = wait_for_poem(tab)
    assert [verse[0] for verse in VERSE.findall(poem)] == list("山高水长"), poem
    assert tab.is_checked("#poet-acrostic")

    check_attention_and_fit(tab)

    # Characters it never saw are named; the poem is not written.
    tab.fill("#poet-prompt", "春A花😀")
    tab.click("#poet-write")
    tab.locator("#poet-message").wait_for(state="visible")
    message = tab.locator("#poet-message").inner_text()
    assert message.startswith('The poet does not know these characters: "A", "😀"'), message
    assert tab.locator("#poet-output").is_hidden()
    tab.check("#poet-acrostic")
    tab.fill("#poet-prompt", "春花秋月夜")
    tab.click("#poet-write")
    tab.wait_for_function("() => document.querySelector('#poet-message').textContent.startsWith('A 藏头诗')")
    assert tab.locator("#poet-poem").get_attribute("data-done") == ""
    tab.fill("#poet-prompt", "山")
    tab.click("#poet-write")
    tab.locator("#poet-message").wait_for(state="hidden")
    assert wait_for_poem(tab).startswith("山")
    context.close()
    assert not outside, f"the page asked for outside URLs: {outside}"
    assert not errors, f"the page logged: {errors}"


@torch.no_grad()
def test_parity_on_a_small_random_gpt(browser, tmp_path):
    """Another configuration (ReLU, 2 layers, 2 heads, d_ff 48, max_len 14), random weights:
    the same logits; greedy poems the same, also when they run into max_len (a random
    model rarely ends a poem)."""
    from transformer_book import GPT, GPTConfig, PoemVocabulary

    prompts = exporter.EXAMPLES + exporter.PARITY_PROMPTS
    characters = set("".join(p for p, _ in prompts) + "，。？云雨风雪")
    vocab = PoemVocabulary(characters)
    settings = {
        "max_len": 14,
        "d_model": 16,
        "heads": 2,
        "layers": 2,
        "d_ff": 48,
        "activation": "relu",
    }
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(vocab), **settings)).eval()
    weights_dir = tmp_path / "weights"
    weights_dir.mkdir()
    half = {name: t.half() for name, t in model.state_dict().items()}
    torch.save(
        {"config": settings, "characters": vocab.tokens[3:], "weights": half},
        weights_dir / exporter.POET_STAGES["base"],
    )
    history = {
        "training": {"steps": 1, "batch_size": 1},
        "held_out_perplexity": 1.0,
        "losses": [1.0],
    }
    (weights_dir / exporter.HISTORY_FILE).write_text(json.dumps(history), encoding="utf-8")
    # The page's rates come from the DPO record: the shipped one will do for a random poet.
    shutil.copy(exporter.WEIGHTS_DIR / exporter.RECORD, weights_dir)
    served = tmp_path / "served"
    exporter.export_poet("base", served / "playground", weights_dir)
    for script in PLAYGROUND.glob("*.js"):  # gpt.js and the modules it imports
        shutil.copy(script, served / "playground")
    poet, meta = exporter.load_poet(served / "playground" / "poet.json")
    context, tab, outside, errors = harness_tab(browser, served)
    run = tab.evaluate(
        RUN_JS,
        {"prompts": meta["parity_prompts"] + meta["examples"], "file": "poet.json"},
    )
    context.close()
    assert not outside and not errors, (outside, errors)
    worst, longest = 0.0, 0
    for example, result in zip(meta["parity_prompts"] + meta["examples"], run["results"]):
        expected = poet.write(example["prompt"], temperature=0, acrostic=example["acrostic"])
        assert result["text"] == expected, (example, result["text"], expected)
        steps = torch.frombuffer(bytearray(base64.b64decode(result["steps"])), dtype=torch.float64).view(
            -1, len(vocab)
        )  # (steps, vocab)
        ids = result["ids"]
        logits = poet.model(torch.tensor([ids]))[0, len(ids) - steps.size(0) :]
        worst = max(worst, (steps - logits.double()).abs().max().item())
        longest = max(longest, len(ids))
    assert worst <= TOLERANCE, worst
    assert longest == settings["max_len"]  # the max_len stop was exercised
    print(f"\nsmall random GPT: largest logit difference {worst:.2e}")


# --- 4. The two poets on the page, the rhyme marked ----------------------------------------


def test_page_offers_the_dpo_poet_and_marks_the_rhyme(browser, width=390, dark=True):
    """Picked with the keyboard, the DPO poet downloads (only then) and writes with the same
    settings; the rhyme characters are marked and the verdict is chapter 19's checker's on the
    same text; the rates quoted are the record's; axe-core finds nothing serious or critical.
    On a phone in the dark theme (the page's light theme at 1280 px is test_page_writes_poems's
    and tests/test_playground_whatif.py's)."""
    from test_playground_whatif import axe_violations
    from transformer_book import repeats_rhyme, rhyme_characters, rhyme_class, rhymes

    meta = json.loads(JSON_PATHS["dpo"].read_text("utf-8"))
    context, tab, outside, errors = local_only_tab(browser, width, dark=dark, console_types=WARNINGS_TOO)
    requested = []
    tab.on("request", lambda request: requested.append(request.url.rsplit("/", 1)[-1]))
    tab.goto(f"{page_url(PAGE)}#mode=continue&prompt=&temperature=0.8&top_p=0.9&seed=3", wait_until="load")

    def verdict_is_pythons(poem: str) -> None:
        marked = tab.locator("#poet-poem [data-rhyme]").all_inner_texts()
        assert marked == rhyme_characters(poem), (poem, marked)
        verdict = tab.locator("#poet-verdict")
        assert verdict.get_attribute("data-rhymes") == str(rhymes(poem)).lower(), poem
        assert verdict.get_attribute("data-repeats") == str(repeats_rhyme(poem)).lower(), poem
        words = verdict.inner_text()
        assert words.startswith("It rhymes" if rhymes(poem) else "It does not rhyme"), words
        assert ("重韵" in words) == repeats_rhyme(poem), words
        for character in marked:
            assert f"{character} ({rhyme_class(character)})" in words or rhyme_class(character) in words

    base = wait_for_poem(tab)
    # this tab asks for reduced motion: the poem is shown whole, not one character at a time
    assert tab.locator("#poet-timing").inner_text().endswith("characters/s in this browser).")
    verdict_is_pythons(base)
    assert tab.locator("#poet-other").is_hidden()  # the other poet is not loaded: no poem of it
    assert not {"poet_dpo.json", "poet_dpo.bin"} & set(requested)  # not before it is picked
    # The labels, and the rates from the record (shown beside them on a wide screen only).
    for stage, poet in meta["poets"].items():
        label = " ".join(tab.locator(f"label:has(#poet-stage-{stage})").text_content().split())
        assert label == f"{poet['label']}: rhymes in {100 * meta['measured'][stage]['rhyme']:.1f}% of its poems"
    measured = meta["measured"]
    assert (
        tab.locator("#poet-measured")
        .inner_text()
        .startswith(f"Measured on {measured['base']['poems']} poems each (seeds 0 to 199, temperature 0.8, top-p 0.9")
    )

    tab.evaluate("() => { document.querySelector('#poet-poem').dataset.done = ''; }")
    tab.focus("#poet-stage-base")
    tab.keyboard.press("ArrowDown")  # the radio group: the next poet, picked and written
    taught = wait_for_poem(tab)
    assert tab.is_checked("#poet-stage-dpo") and requested.count("poet_dpo.bin") == 1
    assert hash_of(tab) == {
        "mode": "continue", "temperature": "0.8", "top_p": "0.9", "seed": "3",
        "poet": "dpo", "layer": "3", "head": "0",
    }  # fmt: skip
    assert tab.locator("#poet-call").inner_text() == (
        'pretrained_poet(stage="dpo").write("", temperature=0.8, top_p=0.9, seed=3)'
    )
    link = tab.evaluate("() => location.href")
    same = tab.evaluate(
        """async () => {  // the page's poem is gpt.js's with the DPO poet's weights
      const PoetGPT = await import(new URL("../_static/playground/gpt.js", location.href));
      const model = await PoetGPT.loadPoet(new URL("../_static/playground/poet_dpo.json",
                                                   location.href).href);
      return PoetGPT.write(model, "", {temperature: 0.8, topP: 0.9, seed: 3}).text;
    }"""
    )
    assert same == taught
    verdict_is_pythons(taught)
    other = tab.locator("#poet-other")  # the base poet's poem, the same settings, beside it
    tab.wait_for_function("(base) => document.querySelector('#poet-other').dataset.text === base", arg=base)
    assert other.is_visible() and other.get_attribute("data-rhymes") == str(rhymes(base)).lower()
    assert other.locator(".poet-rhyme").all_inner_texts() == rhyme_characters(base)
    assert "taught by DPO" in tab.locator("#poet-about").inner_text()
    print(f"\n{width} px: seed 3, base: {base} / DPO: {taught}")
    violations = axe_violations(tab)
    print("axe-core:", [(v["id"], v["impact"], len(v["nodes"])) for v in violations] or "none")
    assert not [v for v in violations if v["impact"] in ("serious", "critical")], violations

    tab.evaluate("() => { document.querySelector('#poet-poem').dataset.done = ''; }")
    tab.keyboard.press("ArrowUp")  # back to the base poet: its poem again, nothing downloaded
    assert wait_for_poem(tab) == base and requested.count("poet.bin") == 1
    tab.wait_for_function("(taught) => document.querySelector('#poet-other').dataset.text === taught", arg=taught)
    assert "poet" not in hash_of(tab)
    overflow = tab.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert overflow[0] <= overflow[1], overflow

    tab.goto(link)  # the DPO poem's link, reloaded: the DPO poet's poem again (from the browser's cache)
    tab.reload(wait_until="load")
    assert wait_for_poem(tab) == taught and tab.is_checked("#poet-stage-dpo")
    assert requested.count("poet_dpo.bin") == 1 and requested.count("poet.bin") == 1
    context.close()
    assert not outside and not errors, (outside, errors)
