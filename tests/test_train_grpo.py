"""tools/train_grpo.py on a toy budget: a run writes the weights and the record, --check passes on a
second run and fails when a file changed, another seed writes files of its own, and the record's
measures of reward hacking count what they say on poems made for them. (The arms' full runs,
PREFERENCE_ARMS, are run by the tool itself; ``python tools/train_grpo.py --arm grpo --check`` repeats
one in full.)"""

import json
from types import SimpleNamespace

import pytest
import torch

import train_grpo as tool
import transformer_book

TOY = {
    "grpo": dict(steps=1, groups=2, group_size=4, lr=1e-4, beta=0.04, iterations=1),
    "grpo_no_kl": dict(steps=1, groups=2, group_size=4, lr=1e-4, beta=0.0, iterations=1),
    "dpo": dict(pairs=2, steps=1, batch_size=2, lr=1e-4, beta=0.1),
}
MEASURES = {"rhyme", "repeated", "rhymed_by_repeat", "form", "repeated_verse", "distinct_verses", "distinct_poems"}
MEASURES |= {"copied_verses", "held_out_perplexity", "samples", "poems"}


@pytest.fixture()
def toy(monkeypatch):
    monkeypatch.setattr(transformer_book, "PREFERENCE_ARMS", TOY)
    monkeypatch.setattr(tool, "SEEDS", range(2))
    monkeypatch.setattr(
        transformer_book, "poem_split", lambda name: ["白日依山尽，黄河入海流。欲穷千里目，更上一层楼。"]
    )


def test_the_arms_include_grpo_without_its_kl_term_with_the_plain_reward_and_with_unlikelihood():
    arms, rewards = transformer_book.PREFERENCE_ARMS, transformer_book.REWARDS
    assert set(arms) == {"grpo", "grpo_no_kl", "grpo_plain", "grpo_unlikely", "grpo_token", "dpo"}
    assert arms["grpo_no_kl"] == {**arms["grpo"], "beta": 0.0} and arms["grpo"]["beta"] > 0
    assert arms["grpo_plain"] == {**arms["grpo"], "reward": "rhyme"}
    assert arms["grpo_unlikely"] == {**arms["grpo"], "unlikelihood": 0.3}
    assert arms["grpo_token"] == {**arms["grpo"], "repeat_cost": 3.0}
    assert rewards[arms["grpo"]["reward"]] is transformer_book.strict_rhyme_reward


def test_the_strict_reward_refuses_a_repeated_rhyme_character():
    strict, plain = transformer_book.strict_rhyme_reward, transformer_book.rhyme_reward
    assert plain(A) == strict(A) == 1.0
    assert plain(B) == 1.0 and strict(B) == 0.0  # rhymes only by closing two verses on 流
    assert plain(C) == strict(C) == 0.0


def test_a_toy_grpo_run_writes_its_record_and_check_reproduces_it(toy, tmp_path):
    result = tool.train_and_write("grpo_no_kl", tmp_path, steps=1)
    record = json.loads((tmp_path / "tang_poet_grpo_no_kl.json").read_text(encoding="utf-8"))
    assert record["training"]["steps"] == 1 and len(record["history"]) == 1
    assert record["training"]["beta"] == 0.0 and record["training"]["seed"] == 0 and record["device"] == "cpu"
    assert set(record["history"][0]) >= {"reward", "form", "repeated", "kl", "clipped", "flat_groups", "loss"}
    for stage in ("tuned", "base"):
        assert set(record[stage]) == MEASURES
        assert len(record[stage]["samples"]) == 2 and record[stage]["held_out_perplexity"] > 1
    assert result["tuned"] == record["tuned"]
    assert not (tmp_path / "tang_poet_grpo_no_kl.pt").exists()  # not a stage the package ships
    assert tool.main(["--arm", "grpo_no_kl", "--check", "--steps", "1", "--out", str(tmp_path)]) == 0


def test_another_seed_writes_its_own_files_and_check_fails_when_one_changed(toy, tmp_path, capsys):
    tool.train_and_write("dpo", tmp_path, steps=1, seed=1)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tang_poet_dpo_seed1.json"]
    record = tmp_path / "tang_poet_dpo_seed1.json"
    assert json.loads(record.read_text(encoding="utf-8"))["training"]["seed"] == 1
    record.write_text(record.read_text(encoding="utf-8").replace('"arm": "dpo"', '"arm": "DPO"'), "utf-8")
    assert tool.main(["--arm", "dpo", "--check", "--steps", "1", "--seed", "1", "--out", str(tmp_path)]) == 1
    assert "tang_poet_dpo_seed1.json" in capsys.readouterr().err


# Made to be counted: A rhymes (流, 楼: 油求); B rhymes by closing two even verses on 流 (重韵); C does not
# rhyme (鸟, 声) and repeats its first verse. 白日依山尽 stands for a verse of the training poems.
A = "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。"
B = "白日依山尽，黄河入海流。欲穷千里目，更上一层流。"
C = "春眠不觉晓，处处闻啼鸟。春眠不觉晓，夜来风雨声。"


def test_the_hacking_measures_count_what_they_name(monkeypatch):
    monkeypatch.setattr(tool, "SEEDS", range(3))
    monkeypatch.setattr(transformer_book, "perplexity", lambda *args, **kwargs: 50.0)
    monkeypatch.setattr(transformer_book, "poem_split", lambda name: [])
    poet = SimpleNamespace(write=lambda seed: (A, B, C)[seed], model=torch.nn.Linear(1, 1), vocab=None)
    measured = tool.measure(poet, frozenset({"白日依山尽"}))
    assert measured["rhyme"] == pytest.approx(2 / 3) and measured["form"] == 1.0
    assert measured["repeated"] == pytest.approx(1 / 3) and measured["rhymed_by_repeat"] == pytest.approx(1 / 3)
    assert measured["repeated_verse"] == pytest.approx(1 / 3)  # C, and not B, whose verses differ
    assert measured["distinct_verses"] == pytest.approx(8 / 12) and measured["distinct_poems"] == 1.0
    assert measured["copied_verses"] == pytest.approx(2 / 12)  # 白日依山尽 in A and in B
    assert measured["held_out_perplexity"] == 50.0 and measured["samples"] == [A, B, C]


def test_the_devices_a_run_may_name():
    assert tool.pick_device("cpu") == torch.device("cpu")
    assert tool.pick_device("auto").type in {"cuda", "mps", "cpu"}
    with pytest.raises(ValueError, match="device must be one of .* got 'tpu'"):
        tool.pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' is not available on this machine"):
            tool.pick_device("cuda")


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(ValueError, match="arm must be one of"):
        transformer_book.tuned_poet("ppo")
    with pytest.raises(SystemExit):
        tool.main(["--arm", "grpo", "--seed", "-1"])
    assert "--seed must be 0 or more; got -1" in capsys.readouterr().err


def test_a_run_on_a_gpu_keeps_to_its_device(toy, tmp_path):
    """On a simulated GPU (tests/device_sim.py: a tensor on two devices in one operation raises as on the
    real one): the tool's "auto" picks it, trains and measures there and writes CPU tensors. (Both loops
    on a device: chapter 20's live steps, which nbval runs on a simulated device.)"""
    from device_sim import simulate

    with simulate("cuda"):
        result = tool.train_and_write("grpo", tmp_path, steps=1, device="auto")
    assert result["device"] == "cuda" and result["tuned"]["held_out_perplexity"] > 1
    stored = torch.load(tmp_path / "tang_poet_grpo.pt")
    assert all(t.device.type == "cpu" and t.dtype == torch.float16 for t in stored["weights"].values())
