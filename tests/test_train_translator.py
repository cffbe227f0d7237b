"""tools/train_translator.py on a toy budget: two runs write identical files, and --check's
comparison finds a changed weight, merge or translation. (The real run takes about 15 minutes;
``python tools/train_translator.py --check`` repeats it in full.)"""

import json

import pytest
import torch

import throughput
import train_translator as tool
from test_throughput import check_consistent
from transformer_book import tatoeba_split


@pytest.fixture()
def toy(monkeypatch):
    small = {name: tatoeba_split(name)[: 300 if name == "train" else 6] for name in ("train", "dev", "test")}
    monkeypatch.setattr(tool, "tatoeba_split", lambda name: small[name])
    recipe = tool.translation  # train_recipe reads its settings from the module
    settings = dict(recipe.TRANSLATION_TRAINING, epochs=2, num_merges=30, max_steps=3, keep_last=2)
    monkeypatch.setattr(recipe, "TRANSLATION_TRAINING", settings)
    monkeypatch.setattr(
        recipe, "TRANSLATION_CONFIG", dict(recipe.TRANSLATION_CONFIG, d_model=16, d_ff=32, heads=2, max_len=64)
    )
    monkeypatch.setattr(tool, "BEAM", {"beam_size": 2, "length_penalty": 0.6})
    monkeypatch.setattr(throughput, "PEAK_SIZE", 64)  # a peak in milliseconds: no speed is checked
    return small


def run_toy(folder, capsys=None):
    """What train_all does, in this process (train_all runs the two models in two processes)."""
    merges = tool.learn_bpe([english for english, _ in tool.tatoeba_split("train")], 30)
    runs = {name: tool.train_run(name, smoothing, merges, "cpu") for name, smoothing in tool.SMOOTHING_RUNS.items()}
    for run in runs.values():  # max_steps=3; the batches are padded, the padding is not a token
        found = run["throughput"]
        assert found.steps == 3 and found.threads == 1 and 0 < found.tokens
        check_consistent(found)
    if capsys is not None:
        capsys.readouterr()
    tool.report_throughput(runs)  # printed, and taken out of the record
    if capsys is not None:
        printed = capsys.readouterr().out.splitlines()
        assert [line.split(":")[0] for line in printed] == [f"{name}, training steps" for name in runs]
        assert all("tokens/s (padding not counted)" in line and "MFU " in line for line in printed)
    saved = runs[tool.SHIPPED_RUN].pop("shipped")
    saved["history"] = runs[tool.SHIPPED_RUN]["history"]
    for run in runs.values():
        run.pop("shipped", None)
        run.pop("seconds")
    record = {"settings": {"training": tool.translation.TRANSLATION_TRAINING}, "runs": runs}
    tool.write(merges, saved, record, folder, folder)
    return record


def test_two_runs_write_identical_files_and_a_change_is_found(toy, tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    record = run_toy(first, capsys)
    run_toy(second)
    assert tool.differences(second, first, first) == []
    run = record["runs"][tool.SHIPPED_RUN]
    assert set(run["test"]) == {"last greedy", "last beam", "averaged greedy", "averaged beam", "shipped beam"}
    assert all(len(outputs) == 6 for outputs in run["test"].values())
    assert [entry["epoch"] for entry in run["history"]] == [1]  # max_steps=3 ends the first epoch

    saved = torch.load(second / tool.TRANSLATOR_WEIGHTS, weights_only=True)
    name = next(iter(saved["state_dict"]))
    saved["state_dict"][name] = saved["state_dict"][name] + 1
    torch.save(saved, second / tool.TRANSLATOR_WEIGHTS)
    (second / tool.MERGES_FILE).write_text("a b\n", encoding="utf-8")
    runs = json.loads((second / tool.RUNS_FILE).read_text(encoding="utf-8"))
    runs["runs"][tool.SHIPPED_RUN]["test"]["last beam"][0] += "!"
    (second / tool.RUNS_FILE).write_text(json.dumps(runs), encoding="utf-8")
    found = tool.differences(second, first, first)
    assert found == [
        tool.MERGES_FILE,
        f"{tool.TRANSLATOR_WEIGHTS}: tensor {name}",
        f"{tool.RUNS_FILE}: histories or translations",
    ]


def test_another_seed_trains_another_model_and_needs_its_own_folder(toy, tmp_path, capsys):
    merges = tool.learn_bpe([english for english, _ in tool.tatoeba_split("train")], 30)
    shipped_seed = tool.train_run("smoothing 0.1", 0.1, merges, "cpu")
    again = tool.train_run("smoothing 0.1", 0.1, merges, "cpu", seed=0)
    other = tool.train_run("smoothing 0.1", 0.1, merges, "cpu", seed=1)
    weights = [run["shipped"]["state_dict"] for run in (shipped_seed, again, other)]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    assert not all(torch.equal(weights[0][name], weights[2][name]) for name in weights[0])
    for argv in (["--seed", "1"], ["--seed", "1", "--check", "--out", str(tmp_path)]):
        with pytest.raises(SystemExit):
            tool.main(argv)
        assert "--seed 1 trains another model than the shipped one" in capsys.readouterr().err


def test_the_spread_record_scores_each_seed_as_chapter_14_does(toy, tmp_path):
    record = run_toy(tmp_path)
    summary = tool.spread_record({0: record, 1: record})
    assert summary["settings"]["training"] == tool.translation.TRANSLATION_TRAINING
    assert list(summary["seeds"]) == ["0", "1"]
    run = record["runs"][tool.SHIPPED_RUN]
    found = summary["seeds"]["1"][tool.SHIPPED_RUN]
    assert set(found["test"]) == {"last greedy", "last beam", "averaged greedy", "averaged beam"}
    references = [translations for _, translations in toy["test"]]
    scores = tool.corpus_scores(run["test"]["averaged beam"], references)
    assert found["test"]["averaged beam"] == {name: round(value, 2) for name, value in scores.items()}
    assert found["dev_loss"] == [round(entry["dev_loss"], 4) for entry in run["history"]]
    tool.write_spread(summary, tmp_path)
    assert json.loads((tmp_path / tool.SEEDS_FILE).read_text(encoding="utf-8")) == summary


def test_the_spread_refuses_the_shipped_seed_and_a_folder(capsys):
    with pytest.raises(SystemExit, match="seed 0 is the shipped run's"):
        tool.main(["--spread", "0", "1"])
    with pytest.raises(SystemExit):
        tool.main(["--spread", "1", "--out", "/tmp/elsewhere"])
    assert "--spread writes its own record" in capsys.readouterr().err
