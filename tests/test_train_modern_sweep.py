"""tools/train_modern_sweep.py and tools/train_length_sweep.py on a toy budget: the runs are
seeded (two sweeps, and runs side by side in two processes, record the same figures), ``--check``
passes on a sweep and fails when one of the checked arm's figures changed, every arm builds the
model it names, and the length sweep scores a learned table only where it has rows. (The real
sweeps took 5.2 and 2.3 minutes on the idle 2-core machine; ``--check`` retrains one arm in full.)"""

import json

import pytest
import torch

import throughput
import train_length_sweep as length
import train_modern_sweep as sweep
import transformer_book
from transformer_book import GPT, ModernDecoder, poems, sweep_file

FOUR = ["床前明月光，疑是地上霜。举头望明月，低头思故乡。", "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。"]
EIGHT = [FOUR[0] + FOUR[1], FOUR[1] + FOUR[0]]


@pytest.fixture()
def toy(monkeypatch):
    def toy_split(name, by):  # the sweeps name their split: by="meaning"
        return FOUR + EIGHT if name == "train" else EIGHT[::-1] + FOUR[:1]

    # the tools read it from the package's top level, chapter 15's cells from the module
    monkeypatch.setattr(transformer_book, "poem_split", toy_split)
    monkeypatch.setattr(poems, "poem_split", toy_split)
    monkeypatch.setattr(sweep, "SIZE", dict(d_model=16, heads=4, layers=1))
    monkeypatch.setattr(sweep, "MODERN", dict(sweep.SIZE, kv_heads=2, tie_embeddings=True, max_len=64))
    monkeypatch.setattr(length, "SIZE", dict(d_model=16, heads=4, layers=1, tie_embeddings=True))
    monkeypatch.setattr(throughput, "PEAK_SIZE", 64)  # a peak in milliseconds: no speed is checked


def test_sweeps_are_seeded_and_check_finds_a_change(toy, tmp_path, monkeypatch):
    settings = dict(sweep.SWEEP, steps=3, batch_size=4)
    first = sweep.sweep_and_write(tmp_path / "first", list(sweep.ARMS), [0, 1], settings, 1)
    second = sweep.sweep_and_write(tmp_path / "second", list(sweep.ARMS), [0, 1], settings, 2)
    assert first["runs"] == second["runs"] and first["arms"] == second["arms"]
    assert set(first["runs"]) == set(sweep.ARMS) and set(first["runs"]["gelu"]) == {"0", "1"}
    run = first["runs"]["modern"]["0"]
    assert run["held_out_perplexity"] > 1 and len(run["train_loss"]) == 1  # 3 steps, 1 stretch
    assert run != first["runs"]["modern"]["1"]  # the seed draws weights and batches
    assert set(first["timings"]["mha"]) == {"0", "1"}
    folder = str(tmp_path / "first")
    toy_check = ["--check", "--steps", "3", "--seeds", "0", "1", "--workers", "1", "--out", folder]
    monkeypatch.setitem(sweep.SWEEP, "batch_size", 4)
    assert sweep.main(toy_check + ["--arm", "learned"]) == 0
    path = tmp_path / "first" / sweep.RECORD_FILE
    record = json.loads(path.read_text(encoding="utf-8"))
    record["runs"]["learned"]["1"]["held_out_perplexity"] += 0.0001
    record["timings"]["learned"]["1"] += 100  # timings are not compared
    path.write_text(json.dumps(record), encoding="utf-8")
    assert sweep.main(toy_check + ["--arm", "learned"]) == 1
    assert sweep.main(toy_check + ["--arm", "gelu"]) == 0


def test_a_kept_run_is_read_not_trained_again(toy, tmp_path, monkeypatch):
    keep = tmp_path / "kept"
    settings = dict(sweep.SWEEP, steps=2, batch_size=4)
    first = sweep.sweep_and_write(tmp_path / "a", ["gpt2"], [0], settings, 1, keep)
    assert [path.name for path in keep.iterdir()] == ["gpt2-seed0.json"]
    # named, the device (--device: a GPU where there is one) changes nothing on the CPU
    on_cpu = sweep.sweep_and_write(tmp_path / "d", ["gpt2"], [0], dict(settings, device="cpu"), 1)
    assert on_cpu["runs"] == first["runs"] and on_cpu["settings"]["device"] == "cpu"
    trained = []
    monkeypatch.setattr(sweep, "train_one", lambda *args: trained.append(args) or 1 / 0)
    again = sweep.sweep_and_write(tmp_path / "b", ["gpt2"], [0], settings, 1, keep)
    assert again == first and not trained  # read from keep, nothing trained
    with pytest.raises(ZeroDivisionError):  # another budget: trained again
        sweep.sweep_and_write(tmp_path / "c", ["gpt2"], [0], dict(settings, steps=3), 1, keep)


def test_the_command_line_keeps_runs_and_records_the_device(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sweep.SWEEP, "batch_size", 4)
    kept = tmp_path / "kept"
    toy_run = ["--steps", "2", "--seeds", "0", "--arms", "gpt2", "--out", str(tmp_path), "--keep", str(kept)]
    assert sweep.main(toy_run + ["--device", "cpu:0", "--workers", "2"]) == 0  # one worker on a device
    record = json.loads((tmp_path / sweep.RECORD_FILE).read_text(encoding="utf-8"))
    assert record["settings"]["device"] == "cpu:0" and "device_name" not in record["settings"]
    assert [path.name for path in kept.iterdir()] == ["gpt2-seed0.json"]
    # another learning rate: its own record, the package's name for it; the runs differ
    assert sweep.main(toy_run + ["--lr", "0.01"]) == 0
    other = json.loads((tmp_path / sweep_file("modern_sweep", 0.01)).read_text(encoding="utf-8"))
    assert other["settings"]["lr"] == 0.01 and other["runs"] != record["runs"]
    assert json.loads((tmp_path / sweep.RECORD_FILE).read_text(encoding="utf-8")) == record
    with pytest.raises(SystemExit):  # argparse: "--lr must be a positive number; got -0.1"
        sweep.main(toy_run + ["--lr", "-0.1"])
    assert "--lr must be a positive number; got -0.1" in capsys.readouterr().err


def test_each_arm_builds_what_it_names(toy):
    assert isinstance(sweep.build("gpt2", 30), GPT)
    configs = {arm: sweep.build(arm, 30).config for arm in sweep.ARMS if arm != "gpt2"}
    assert all(isinstance(sweep.build(arm, 30), ModernDecoder) for arm in configs)
    assert configs["modern"].kv_heads == 2 and configs["mha"].kv_heads == 4
    assert configs["layernorm"].norm == "layer" and configs["gelu"].feed_forward == "gelu"
    assert configs["learned"].positions == "learned" and configs["modern"].positions == "rotary"
    assert {length.build(arm, 30).config.positions for arm in length.ARMS} == {
        "sinusoidal",
        "learned",
        "rotary",
        "alibi",
        "none",
    }
    with pytest.raises(ValueError, match=r"arm must be one of .*got 'swish'"):
        sweep.build("swish", 30)
    with pytest.raises(ValueError, match=r"arm must be one of .*got 'rope'"):
        length.build("rope", 30)


def test_the_length_sweep_scores_a_learned_table_only_where_it_has_rows(toy, tmp_path):
    training = dict(length.TRAINING, steps=2, batch_size=2)
    record = length.sweep_and_write(tmp_path, list(length.ARMS), [0], training, 1)
    for arm, runs in record["runs"].items():
        by_position = runs["0"]["loss_by_position"]
        assert len(by_position) == length.PREDICTIONS == 49
        known = [value for value in by_position if value is not None]
        if arm == "learned":  # rows 0..25: predictions at positions 0..24
            assert by_position[length.TRAIN_LEN - 1 :] == [None] * 24
            assert len(known) == length.TRAIN_LEN - 1
        else:
            assert len(known) == 49 and all(value > 0 for value in known)
        # early stopping: the weights of the lowest held-out score, and the last step's
        run = runs["0"]
        assert run["four_verse_perplexity"] == min(value for _, value in run["held_out_curve"])
        assert [run["best_step"], run["four_verse_perplexity"]] in run["held_out_curve"]
        assert len(run["loss_by_position_end"]) == 49
    # named, the device (--device: a GPU where there is one) changes nothing on the CPU
    again = length.sweep_and_write(tmp_path / "again", ["rotary"], [0], dict(training, device="cpu"), 1)
    assert again["runs"]["rotary"] == record["runs"]["rotary"] and again["settings"]["device"] == "cpu"


def test_loss_by_position_is_the_mean_over_poems_at_each_position():
    torch.manual_seed(0)
    model = length.build("rotary", 12).eval()
    batch = torch.randint(3, 12, (3, 8))
    batch[2, 6:] = 0  # padding: left out of positions 5 and 6
    got = length.loss_by_position(model, batch, 0, 7)
    logits = model(batch)[:, :-1]
    each = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")
    assert got[0] == round(each[:, 0].mean().item(), 4)
    assert got[6] == round(each[:2, 6].mean().item(), 4)
