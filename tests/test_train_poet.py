"""tools/train_poet.py on a toy budget: two runs write identical files, --check passes on them
and fails when a file changed, and pretrained_poet-style loading gives the trained model back.
(The real run takes 11 to 12 minutes on the 2-core machine; ``python tools/train_poet.py --check``
repeats it in full.)"""

import io
import json

import pytest
import torch

import throughput
import train_poet as tool
from test_throughput import check_consistent
from transformer_book import flops_per_token
from transformer_book import poet as recipe


@pytest.fixture()
def toy(monkeypatch):
    monkeypatch.setattr(recipe, "POET_CONFIG", {"max_len": 64, "d_model": 16, "heads": 2, "layers": 1})
    monkeypatch.setattr(tool, "SAMPLES", 3)
    monkeypatch.setattr(throughput, "PEAK_SIZE", 64)  # a peak in milliseconds: no speed is checked
    monkeypatch.setattr(
        recipe,
        "poem_split",
        lambda name: (
            ["白日依山尽，黄河入海流。"] * 4
            if name == "held-out"
            else ["床前明月光，疑是地上霜。", "春眠不觉晓，处处闻啼鸟。"]
        ),
    )


def test_two_toy_runs_are_identical_and_check_finds_a_change(toy, tmp_path, capsys):
    first = tool.train_and_write(tmp_path / "first", steps=3)
    # the steps' throughput, returned to be printed, never written: 2 poems of 12 characters and
    # their 2 boundaries a step, no padding
    found = first.pop("throughput")
    config = recipe.GPTConfig(len(recipe.PoemVocabulary.from_poems(recipe.poem_split("train"))), **recipe.POET_CONFIG)
    assert (found.steps, found.tokens, found.threads) == (3, 3 * 2 * 14, 1)
    assert found.flops == 3 * 2 * 14 * flops_per_token(config, 14)
    check_consistent(found)
    tool.train_and_write(tmp_path / "second", steps=3)
    for name in (recipe.POET_WEIGHTS, recipe.HISTORY_FILE):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()
    history = json.loads((tmp_path / "first" / recipe.HISTORY_FILE).read_text(encoding="utf-8"))
    assert len(history["losses"]) == 3 and history["training"]["steps"] == 3
    assert len(history["samples"]) == len(history["untrained_samples"]) == 3
    assert history["held_out_perplexity"] == first["held_out_perplexity"] > 1
    capsys.readouterr()
    assert tool.main(["--check", "--steps", "3", "--out", str(tmp_path / "first")]) == 0
    printed = capsys.readouterr().out
    assert "training steps: " in printed and "tokens/s (padding not counted)" in printed
    assert "MFU " in printed and "3 steps, 84 tokens" in printed
    (tmp_path / "first" / recipe.HISTORY_FILE).write_text("{}", encoding="utf-8")
    assert tool.main(["--check", "--steps", "3", "--out", str(tmp_path / "first")]) == 1


def test_the_stored_weights_load_back_as_the_trained_model(toy, tmp_path):
    tool.train_and_write(tmp_path, steps=2)
    stored = torch.load(io.BytesIO((tmp_path / recipe.POET_WEIGHTS).read_bytes()))
    assert all(tensor.dtype == torch.float16 for tensor in stored["weights"].values())
    poet, _ = recipe.train_poet(steps=2)
    vocab = recipe.PoemVocabulary(stored["characters"])
    assert vocab.tokens == poet.vocab.tokens
    for name, tensor in poet.model.state_dict().items():
        assert torch.equal(stored["weights"][name], tensor.half()), name


def test_train_poet_refuses_a_bad_budget():
    with pytest.raises(ValueError, match="steps must be a positive int; got steps=0"):
        recipe.train_poet(steps=0)


def test_the_shipped_poet_writes_what_its_record_says():
    from transformer_book import poet_history, pretrained_poet, regular_form

    poet = pretrained_poet()
    record = poet_history()
    assert record["training"] == recipe.POET_TRAINING
    assert len(record["samples"]) == len(record["untrained_samples"]) == 200
    assert len(record["losses"]) == recipe.POET_TRAINING["steps"]
    assert all(record["samples"]) and all(record["untrained_samples"])  # none empty
    poem = poet.write()  # the defaults: temperature 0.8, top_p 0.9, seed 0
    assert isinstance(poem, str) and poem == record["samples"][0] and regular_form(poem)
    assert poet.write(seed=199) == record["samples"][199]
    acrostic = poet.write("春花秋月", acrostic=True, seed=5)
    verses = [verse for verse in acrostic.replace("。", "，").split("，") if verse]
    assert [verse[0] for verse in verses] == list("春花秋月") and regular_form(acrostic)


class _EagerToEnd(recipe.GPT):
    """A GPT that always wants to end the poem (logit 100 for <s>)."""

    def forward(self, tokens, caches=None, offset=0, need_weights=False):
        logits = super().forward(tokens, caches, offset, need_weights)
        logits[..., 1] = 100.0
        return logits


def test_a_poem_is_never_empty():
    vocab = recipe.PoemVocabulary(list("白日依山尽，。"))
    torch.manual_seed(0)
    model = _EagerToEnd(recipe.GPTConfig(len(vocab), max_len=16, d_model=8, heads=2, layers=1))
    poet = recipe.Poet(model, vocab)
    for seed in range(5):  # <s> is forbidden first, then drawn at once
        assert len(poet.write(seed=seed)) == 1
    assert len(poet.write(seed=0, temperature=0)) == 1  # greedy too
    assert poet.write("白日", seed=0) == "白日"  # a prompt may be the whole poem
