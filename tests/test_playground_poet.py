"""The poem page of the playground: its files, its JavaScript GPT against PyTorch, the page.

1. The exporter (tools/export_poet_playground.py): the files are the shipped weights, bit for
   bit; exporting again gives the same bytes; --check fails when a file changes; the page
   downloads at most 4 MB.
2. Parity: book/_static/playground/gpt.js, run in headless Chromium, against the package's GPT
   loaded from the same file: logits within ``TOLERANCE`` of PyTorch's float32 model, the
   attention maps too, greedy poems token for token those of ``Poet.write`` at temperature 0,
   藏头 verses opening with their characters, top-p and top-k as the package's, unknown
   characters named.
3. The built page (BOOK_HTML, default _build/html): the weights load only when asked, the poem
   appears, the attention map draws; at 390 px in the dark theme nothing pans sideways.
Everything is served on 127.0.0.1; any other request is refused and fails the test. Timings
are printed (characters per second), never asserted.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import export_poet_playground as exporter
import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
STATIC = REPO_ROOT / "book" / "_static"
PLAYGROUND = STATIC / "playground"
JSON_PATH = PLAYGROUND / "poet.json"


@pytest.fixture(scope="module")
def exported():
    """The committed files, loaded into the package's Poet."""
    return exporter.load_poet(JSON_PATH)


# --- 1. The exporter ------------------------------------------------------------------


def test_the_files_are_the_shipped_weights(exported):
    from transformer_book import pretrained_poet

    poet, meta = exported
    shipped = pretrained_poet()
    assert poet.vocab.tokens == shipped.vocab.tokens == meta["tokens"]
    ours, theirs = poet.model.state_dict(), shipped.model.state_dict()
    assert list(ours) == list(theirs)
    for name in theirs:
        assert torch.equal(ours[name], theirs[name]), name
    assert poet.model.config == shipped.model.config
    _, raw = exporter.read_shipped()
    assert meta["source"]["sha256"] == hashlib.sha256(raw).hexdigest()
    # float16, each tensor once: two bytes per parameter
    count = sum(p.numel() for p in shipped.model.parameters())
    assert meta["weights"]["bytes"] == 2 * count == (PLAYGROUND / "poet.bin").stat().st_size
    history = json.loads((exporter.WEIGHTS / exporter.HISTORY_FILE).read_text("utf-8"))
    assert meta["training"]["held_out_perplexity"] == history["held_out_perplexity"]
    assert meta["training"]["steps"] == len(history["losses"])


def test_the_page_downloads_at_most_4_mb():
    total = (PLAYGROUND / "poet.bin").stat().st_size + JSON_PATH.stat().st_size
    print(f"poet.bin + poet.json: {total:,} bytes")
    assert total <= exporter.MAX_BYTES == 4_000_000


def test_export_is_deterministic_and_check_sees_a_change(tmp_path):
    first = exporter.export(tmp_path / "one")
    second = exporter.export(tmp_path / "two")
    for one, two in zip(first, second, strict=True):
        assert one.read_bytes() == two.read_bytes(), one.name
    assert exporter.check() == []  # the committed files are the tool's
    assert exporter.main(["--check"]) == 0
    # A changed weight, or a changed JSON, is caught.
    out = tmp_path / "one"
    data = bytearray((out / "poet.bin").read_bytes())
    data[1000] ^= 1
    (out / "poet.bin").write_bytes(bytes(data))
    assert exporter.check(out) == ["poet.bin"]
    assert exporter.main(["--check", "--out", str(out)]) == 1
    (out / "poet.json").write_text(
        (out / "poet.json").read_text("utf-8").replace("写诗", "作诗"), encoding="utf-8"
    )
    assert exporter.check(out) == ["poet.json", "poet.bin"]


def test_loader_refuses_a_damaged_file(tmp_path):
    json_path, bin_path = exporter.export(tmp_path)
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
