"""The recorded spread of the chapters' in-notebook trainings (weights/training_spread.json).

tools/measure_training_spread.py trained each of them as its chapter does, with five seeds, on three
CPU kernel paths. A chapter asserts a property of its own run and prints the recorded range beside
it; every recorded run must have that property too, with room to spare, so that the assertion holds
on a reader's machine as it did on ours.
"""

import json
from importlib.resources import files

import pytest

from notebooks import KERNEL_PATHS
from transformer_book import training_spread

RECORD = json.loads((files("transformer_book") / "weights" / "training_spread.json").read_text("utf-8"))
RUNS = ("dates", "ablations", "numbers", "poems")


def runs(name: str) -> list[dict]:
    return list(RECORD["runs"][name].values())


@pytest.mark.parametrize("name", RUNS)
def test_every_run_is_recorded_for_five_seeds_on_every_kernel_path(name):
    expected = {f"{path}, seed {seed}" for path in KERNEL_PATHS for seed in range(5)}
    assert set(RECORD["runs"][name]) == expected
    assert RECORD["kernel paths"] == KERNEL_PATHS


def test_spread_is_the_lowest_and_highest_recorded_figure():
    values = [run["held-out exact match %"] for run in runs("dates")]
    assert training_spread("dates", "held-out exact match %") == (min(values), max(values), 15)


def test_bad_names_are_refused_with_what_is_recorded():
    with pytest.raises(
        ValueError, match=r"run must be one of \['ablations', 'dates', 'numbers', 'poems'\]; got run='date'"
    ):
        training_spread("date", "last loss")
    with pytest.raises(ValueError, match=r"figure must be one of .*'last loss'.*; got figure='loss'"):
        training_spread("numbers", "loss")


def test_chapter_9s_check_holds_on_every_recorded_run():
    # its training cell: assert accuracy > 0.9
    assert min(run["held-out exact match %"] for run in runs("dates")) > 90 + 3


def test_chapter_12s_check_holds_on_every_recorded_run():
    # its training cell runs the first 40 steps: assert my_history[-1]["loss"] < my_history[0]["loss"] - 1.0
    for run in runs("numbers"):
        assert run["loss after 40 steps"] < run["first loss"] - 1.0 - 0.3
    # and the 120 steps of the shipped run end below 1.0 (the chapter's 'right about half the time')
    assert max(run["last loss"] for run in runs("numbers")) < 1.0 - 0.2


def test_chapter_15s_check_holds_on_every_recorded_run():
    # its training cell: assert losses[-1] < losses[0] - 1.5; then the bigram (268) beats it
    for run in runs("poems"):
        assert run["last loss"] < run["first loss"] - 1.5 - 0.3
        assert run["held-out perplexity"] > 268 * 1.5


def test_chapter_11s_ablation_order_holds_in_every_recorded_run():
    # its ablation cell asserts, and its text says: without positions or without the scaling the
    # loss ends higher than the paper's model's, with pre-norm lower; in each run (same seed)
    for run in runs("ablations"):
        paper = run["paper (post-norm): final loss"]
        assert run["no positional encoding: final loss"] > paper + 0.02
        assert run["no √d_k scaling: final loss"] > paper + 0.1
        assert run["pre-norm: final loss"] < paper - 0.1
