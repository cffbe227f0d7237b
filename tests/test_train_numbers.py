"""tools/train_numbers.py on a toy budget: two runs write identical files, the checkpoints are points
of one run, both record the environment that trained them, and --check's comparison finds a changed
weight or decoding (not a changed environment). (The real run takes about 7
minutes; ``python tools/train_numbers.py --check`` repeats it in full.)"""

import json

import torch

import throughput
import train_numbers as tool
from notebooks import environment
from test_throughput import check_consistent


def test_two_toy_runs_write_identical_files_and_a_change_is_found(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(tool, "CHECKPOINT_STEPS", (3, 6))
    monkeypatch.setattr(tool, "HELD_OUT", 40)
    monkeypatch.setattr(throughput, "PEAK_SIZE", 64)  # a peak in milliseconds: no speed is checked
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setattr(tool, "WEIGHTS_DIR", first)
    assert tool.main([]) == 0  # writes the files, prints the training steps' throughput
    printed = capsys.readouterr().out
    assert "training steps: " in printed and "tokens/s (padding not counted)" in printed and "MFU " in printed
    saved, record, found = tool.train_all()
    tool.write(saved, record, second)
    assert found.steps == 3 + 6 and found.threads == 1 and 0 < found.tokens  # the steps of both runs
    check_consistent(found)
    assert tool.differences(second, first) == []
    saved = torch.load(first / tool.WEIGHTS_FILE, weights_only=True)
    assert sorted(saved["checkpoints"]) == [3, 6] and len(saved["history"]) == 6
    record = json.loads((first / tool.RUNS_FILE).read_text(encoding="utf-8"))
    assert set(record["checkpoints"]["6"]["decoders"]) == set(tool.DECODERS)
    assert len(record["checkpoints"]["6"]["right answer log p"]) == 40
    # both files record the environment that trained them; a check compares them without it
    assert saved["environment"] == record["environment"] == environment()
    other = {**environment(), "torch": "2.13.0+cu130"}
    torch.save({**saved, "environment": other}, second / tool.WEIGHTS_FILE)
    (second / tool.RUNS_FILE).write_text(json.dumps({**record, "environment": other}), encoding="utf-8")
    assert tool.differences(second, first) == []

    name = next(iter(saved["checkpoints"][6]))
    saved["checkpoints"][6][name] = saved["checkpoints"][6][name] + 1
    torch.save(saved, second / tool.WEIGHTS_FILE)
    record["checkpoints"]["3"]["decoders"]["greedy"]["right"] += 1
    (second / tool.RUNS_FILE).write_text(json.dumps(record), encoding="utf-8")
    assert tool.differences(second, first) == [
        f"{tool.WEIGHTS_FILE}: checkpoint 6, tensor {name}",
        f"{tool.RUNS_FILE}: decodings",
    ]


def test_check_reads_the_environment_the_shipped_files_record(monkeypatch, tmp_path):
    # --check names how this environment differs from the one the shipped files record
    monkeypatch.setattr(tool, "WEIGHTS_DIR", tmp_path)
    assert tool.recorded_environment() is None  # no files
    (tmp_path / tool.RUNS_FILE).write_text(json.dumps({"checkpoints": {}}), encoding="utf-8")
    assert tool.recorded_environment() is None  # files that record none
    made_in = {**environment(), "cpu_capability": "AVX2"}
    (tmp_path / tool.RUNS_FILE).write_text(json.dumps({"environment": made_in}), encoding="utf-8")
    assert tool.recorded_environment() == made_in


def test_shipped_numbers_files_record_the_environment_that_trained_them():
    # A seeded CPU run gives the same bits only with the same torch build, kernels and threads:
    # both shipped files say which, and --check names it when its files differ.
    saved = torch.load(tool.WEIGHTS_DIR / tool.WEIGHTS_FILE, weights_only=True)
    recorded = tool.recorded_environment()
    assert saved["environment"] == recorded
    assert recorded.keys() == environment().keys()
    assert recorded["threads"] == 1 and recorded["torch"].startswith("2.13.0")
