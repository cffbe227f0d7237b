"""tools/train_grpo.py on a toy budget: a run writes the weights and the record, --check passes on a
second run and fails when a file changed. (The arms' full runs, PREFERENCE_ARMS, are run by the tool
itself; ``python tools/train_grpo.py --arm grpo --check`` repeats one in full.)"""

import json

import pytest

import train_grpo as tool
import transformer_book

TOY = {
    "grpo": dict(steps=1, groups=2, group_size=4, lr=1e-4, beta=0.04, iterations=1),
    "dpo": dict(pairs=2, steps=1, batch_size=2, lr=1e-4, beta=0.1),
}


@pytest.fixture()
def toy(monkeypatch):
    monkeypatch.setattr(transformer_book, "PREFERENCE_ARMS", TOY)
    monkeypatch.setattr(tool, "SEEDS", range(2))
    monkeypatch.setattr(
        transformer_book, "poem_split", lambda name: ["白日依山尽，黄河入海流。欲穷千里目，更上一层楼。"]
    )


def test_a_toy_grpo_run_writes_its_record_and_check_reproduces_it(toy, tmp_path):
    result = tool.train_and_write("grpo", tmp_path, steps=1)
    record = json.loads((tmp_path / "tang_poet_grpo.json").read_text(encoding="utf-8"))
    assert record["training"]["steps"] == 1 and len(record["history"]) == 1
    assert set(record["history"][0]) >= {"reward", "kl", "clipped", "flat_groups", "loss"}
    for stage in ("tuned", "base"):
        assert len(record[stage]["samples"]) == 2 and record[stage]["held_out_perplexity"] > 1
    assert result["tuned"] == record["tuned"]
    assert (tmp_path / "tang_poet_grpo.pt").stat().st_size > 100_000
    assert tool.main(["--arm", "grpo", "--check", "--steps", "1", "--out", str(tmp_path)]) == 0


def test_check_fails_when_a_dpo_file_changed(toy, tmp_path, capsys):
    tool.train_and_write("dpo", tmp_path, steps=1)
    record = tmp_path / "tang_poet_dpo.json"
    record.write_text(record.read_text(encoding="utf-8").replace('"arm": "dpo"', '"arm": "DPO"'), "utf-8")
    assert tool.main(["--arm", "dpo", "--check", "--steps", "1", "--out", str(tmp_path)]) == 1
    assert "tang_poet_dpo.json" in capsys.readouterr().err


def test_an_unknown_arm_is_refused():
    with pytest.raises(ValueError, match="arm must be one of"):
        transformer_book.tuned_poet("ppo")
