"""Tests for transformer_book.training (chapter 9): fixed-step training, teacher-forced exact match."""

import json

import pytest
import torch

from transformer_book import (
    DATES_CONFIG,
    dates_task,
    exact_match_accuracy,
    make_model,
    padding_mask,
    subsequent_mask,
    train_model,
)

TINY = dict(num_layers=1, d_model=16, d_ff=32, heads=2, dropout=0.0)


def count(model):
    return sum(parameter.numel() for parameter in model.parameters())


def test_dates_config_is_small():
    from transformer_book import make_model

    task = dates_task()
    model = make_model(len(task.source_vocab), len(task.target_vocab), **DATES_CONFIG)
    assert count(model) <= 250_000


def test_training_is_seeded_and_runs_exactly_the_steps():
    task = dates_task()
    first, history = train_model(task, 6, seed=1, config=TINY, batch_size=8, log_every=2)
    second, _ = train_model(task, 6, seed=1, config=TINY, batch_size=8, log_every=2)
    assert [row["step"] for row in history] == [2, 4, 6]
    assert set(history[0]) >= {"step", "loss", "lr"}
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
    other, _ = train_model(task, 6, seed=2, config=TINY, batch_size=8)
    assert not torch.equal(next(first.parameters()), next(other.parameters()))
    assert not first.training  # returned in eval mode


def test_overrides_reach_make_model():
    model, _ = train_model(dates_task(), 1, config=TINY, batch_size=4, d_model=8, d_ff=16)
    assert model.generator.proj.in_features == 8


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="got 0, 8, 1"):
        train_model(dates_task(), 0, config=TINY, batch_size=8)


def greedy_exact(model, task, pairs):
    """Exact match by plain greedy decoding (the definition the teacher-forced score must equal)."""
    source, target = task.batch(pairs)
    tokens = target[:, :1]  # (batch, 1): the start token
    with torch.no_grad():
        memory = model.encode(source, padding_mask(source, 0))
        for _ in range(target.size(1) - 1):
            hidden = model.decode(memory, padding_mask(source, 0), tokens, subsequent_mask(tokens.size(1)))
            next_token = model.generator(hidden[:, -1]).argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, next_token], dim=1)
    labels = target[:, 1:]  # (batch, target + 1): the text, </s>, then padding
    correct = (tokens[:, 1:] == labels) | (labels == task.target_vocab.pad_id)
    return correct.all(dim=1).float().mean().item()


def test_teacher_forced_exact_match_equals_greedy_decoding():
    task = dates_task()
    pairs = dates_task(held_out=True).pairs(60, seed=0)
    config = dict(num_layers=1, d_model=32, d_ff=64, heads=2, dropout=0.0)
    model, _ = train_model(task, 150, config=config, batch_size=32, seed=0)
    score = exact_match_accuracy(model, task, pairs, batch_size=25)
    assert 0.2 < score < 1.0  # partly trained: some dates right, some wrong
    assert score == pytest.approx(greedy_exact(model, task, pairs))


def test_a_shorter_run_is_the_start_of_a_longer_one():
    # Chapter 11 reuses the first steps of chapter 9's run as its ablation baseline: the batches
    # and learning rates of step s must not depend on the total number of steps.
    task = dates_task()
    _, short = train_model(task, 3, seed=4, config=TINY, batch_size=8)
    _, long = train_model(task, 5, seed=4, config=TINY, batch_size=8)
    assert short == long[:3]


# The weights the package ships (chapters 10 and 11 load them instead of training again).


def test_shipped_dates_model_is_chapter_9s_configuration_and_training():
    from transformer_book import DATES_CONFIG, DATES_TRAINING, pretrained_dates_model

    model, history = pretrained_dates_model()
    assert not model.training  # eval mode: no dropout when decoding
    assert len(history) == DATES_TRAINING["steps"]
    assert [row["step"] for row in history] == list(range(1, DATES_TRAINING["steps"] + 1))
    task = dates_task()
    reference = make_model(len(task.source_vocab), len(task.target_vocab), **DATES_CONFIG)
    assert {name: value.shape for name, value in model.state_dict().items()} == {
        name: value.shape for name, value in reference.state_dict().items()
    }


def test_shipped_dates_model_passes_chapter_9s_test():
    from transformer_book import exact_match_accuracy, pretrained_dates_model

    model, _ = pretrained_dates_model()
    held_out = dates_task(held_out=True).pairs(1000, seed=1)
    assert exact_match_accuracy(model, dates_task(), held_out, "cpu") >= 0.99


def test_shipped_weights_equal_the_playgrounds_and_record_their_training():
    from importlib.resources import files

    import playground_files  # tools/ is on the path (pytest's pythonpath)
    from transformer_book import DATES_CONFIG, DATES_TRAINING, pretrained_dates_model

    playground, meta = playground_files.load_model(playground_files.OUT_DIR / "dates.json")
    ours, _ = pretrained_dates_model()
    for name, value in ours.state_dict().items():
        assert torch.equal(value, playground.state_dict()[name]), name
    with (files("transformer_book") / "weights" / "dates.pt").open("rb") as handle:
        saved = torch.load(handle, map_location="cpu", weights_only=True)
    assert saved["training"] == DATES_TRAINING and saved["config"] == DATES_CONFIG
    assert meta["training"]["steps"] == DATES_TRAINING["steps"]


def test_shipped_dates_weights_record_the_environment_that_trained_them():
    # A seeded CPU run gives the same bits only with the same torch build, kernels and threads
    # (tools/export_playground.py): both copies say which, in notebooks.environment()'s terms.
    from importlib.resources import files

    import notebooks
    import playground_files

    meta = json.loads((playground_files.OUT_DIR / "dates.json").read_text(encoding="utf-8"))
    with (files("transformer_book") / "weights" / "dates.pt").open("rb") as handle:
        saved = torch.load(handle, map_location="cpu", weights_only=True)
    recorded = meta["training"]["environment"]
    assert saved["environment"] == recorded
    assert recorded.keys() == notebooks.environment().keys()
    assert recorded["threads"] == 1 and recorded["torch"].startswith("2.13.0")


def test_a_check_names_the_environment_that_differs(capsys):
    import notebooks

    here = notebooks.environment()
    older = {**here, "torch": "2.13.0+cu130", "cpu_capability": "AVX2"}
    assert notebooks.check_outcome(["dates.bin"], "the committed files", recorded=older) == 1
    err = capsys.readouterr().err
    assert "differs from the committed files: dates.bin" in err
    assert "torch: '2.13.0+cu130' there, " + repr(here["torch"]) + " here" in err
    assert "cpu_capability: 'AVX2' there" in err and "threads:" not in err
    # the same environment, or no difference at all: no word of it
    assert notebooks.check_outcome(["dates.bin"], "x", recorded=here) == 1
    assert "environment" not in capsys.readouterr().err
    assert notebooks.check_outcome([], "x", recorded=older) == 0
    assert "environment" not in capsys.readouterr().out
    notebooks.check_outcome(["dates.bin"], "x", recorded=None)
    assert "record no environment" in capsys.readouterr().err


def test_saved_files_are_compared_without_their_environment(tmp_path):
    import notebooks

    weights = {"w": torch.arange(4.0), "history": [{"step": 1, "loss": 0.5}]}
    torch.save({**weights, "environment": {"torch": "a"}}, tmp_path / "old.pt")
    torch.save({**weights, "environment": {"torch": "b"}}, tmp_path / "new.pt")
    assert not notebooks.saved_differs(tmp_path / "new.pt", tmp_path / "old.pt", "environment")
    assert notebooks.saved_differs(tmp_path / "new.pt", tmp_path / "old.pt")
    torch.save({**weights, "w": torch.tensor([0.0, 1.0, 2.0, 3.5])}, tmp_path / "new.pt")
    assert notebooks.saved_differs(tmp_path / "new.pt", tmp_path / "old.pt", "environment")
