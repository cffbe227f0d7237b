"""The one reader of the package's shipped files (chapter 9's shipped module)."""

import pytest
import torch

from transformer_book import load_record, load_weights, seeded_name, shipped_file


def test_it_reads_weights_records_and_data():
    saved = load_weights("dates.pt")
    assert {"config", "state_dict", "history"} <= set(saved)
    assert all(value.device.type == "cpu" for value in saved["state_dict"].values())
    assert "runs" in load_record("training_spread.json")
    assert shipped_file("data", "tatoeba_cmn.tsv.xz").read_bytes()[:6] == b"\xfd7zXZ\x00"  # xz


def test_weights_cannot_run_code(tmp_path, monkeypatch):
    # A pickle that would call a function is refused: the files are read with weights_only=True.
    (tmp_path / "weights").mkdir()
    torch.save({"run": print}, tmp_path / "weights" / "evil.pt")
    # the package's folder, as the module that defines load_weights sees it, moved to tmp_path
    monkeypatch.setitem(load_weights.__globals__, "files", lambda _: tmp_path)
    with pytest.raises(Exception, match="Weights only load failed"):
        load_weights("evil.pt")


def test_bad_names_are_refused_by_name():
    with pytest.raises(ValueError, match=r"folder must be one of \('data', 'weights'\); got folder='src'"):
        shipped_file("src", "x")
    with pytest.raises(FileNotFoundError, match="the package ships no weights/nothing.pt"):
        load_weights("nothing.pt")


def test_another_seeds_run_has_its_own_file():
    assert seeded_name("scaling_sweep.json") == "scaling_sweep.json"
    assert seeded_name("tang_poet_sft_full.json", 2) == "tang_poet_sft_full_seed2.json"
    for wrong in (-1, 1.5, True):
        with pytest.raises(ValueError, match=f"seed must be an int, 0 or more; got {wrong!r}"):
            seeded_name("a.json", wrong)
