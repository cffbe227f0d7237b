"""tools/train_ablations.py: it trains what chapter 11's ablation cell trains (the same variants,
steps and seed), its shipped record holds what the chapter reads from it, and on a toy budget
(2 steps, 20 held-out dates) a second run writes the same file, which ``--check`` finds identical,
and finds a changed loss. (The full run takes about 20 s: ``python tools/train_ablations.py
--check``.)"""

import ast
import json

import pytest

import train_ablations as tool
from notebooks import REPO_ROOT, cells, environment, source

CHAPTER = REPO_ROOT / "book" / "11_inside_the_model.ipynb"


def chapter_values(start: str, names: tuple[str, ...]) -> dict:
    """The literal values the chapter's code cell that starts with ``start`` assigns to ``names``."""
    (cell,) = [source(c) for c in cells(CHAPTER, "code") if source(c).startswith(start)]
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(cell).body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in names
    }


def test_the_tool_trains_what_the_chapter_trains():
    found = chapter_values("ABLATION_STEPS", ("ABLATION_STEPS", "ablations"))
    assert found == {"ABLATION_STEPS": tool.STEPS, "ablations": tool.VARIANTS}
    assert list(found["ablations"]) == list(tool.VARIANTS)  # the same order: the table's rows
    assert chapter_values("seed = ", ("seed",)) == {"seed": tool.SEED}


def test_the_shipped_record_holds_the_chapters_figures():
    record = json.loads((tool.WEIGHTS_DIR / tool.RECORD_FILE).read_text(encoding="utf-8"))
    assert list(record["variants"]) == list(tool.VARIANTS)
    assert record["settings"]["steps"] == tool.STEPS and record["settings"]["seed"] == tool.SEED
    assert record["settings"]["held_out"] == tool.HELD_OUT
    assert set(record["environment"]) == set(environment())
    for name, run in record["variants"].items():
        assert run["options"] == tool.VARIANTS[name]
        assert len(run["losses"]) == tool.STEPS
        # the final loss is the mean of the last 25 unrounded losses; the stored ones are rounded to
        # 4 decimals, so their mean is within 5e-5 of it, and the final loss rounded to 3 decimals
        assert run["final loss"] == pytest.approx(sum(run["losses"][-tool.LAST :]) / tool.LAST, abs=5.5e-4)
        assert 0 < run["character accuracy"] < 1


def test_a_toy_run_is_repeated_exactly_and_check_finds_a_change(monkeypatch, tmp_path, capsys):
    toy = tool.train_all
    monkeypatch.setattr(tool, "train_all", lambda: toy(steps=2, held_out=20))
    monkeypatch.setattr(tool, "WEIGHTS_DIR", tmp_path)
    assert tool.main([]) == 0  # trains and writes the record
    path = tmp_path / tool.RECORD_FILE
    record = json.loads(path.read_text(encoding="utf-8"))
    assert [len(run["losses"]) for run in record["variants"].values()] == [2, 2, 2, 2]
    assert record["environment"] == environment()
    assert tool.main(["--check"]) == 0  # trained again: the same file
    assert capsys.readouterr().out.splitlines()[-1] == "identical"
    record["variants"]["pre-norm"]["losses"][1] += 1e-4
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert tool.main(["--check"]) == 1
    assert f"differs from {tmp_path}: {tool.RECORD_FILE}" in capsys.readouterr().err


def test_the_final_loss_is_the_mean_of_the_last_25():
    assert tool.final_loss([9.0] * 5 + [1.0] * 25) == 1.0
    assert tool.final_loss([2.0, 4.0]) == 3.0  # fewer steps than 25: all of them
