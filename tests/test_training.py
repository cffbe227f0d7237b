"""Tests for transformer_book.training (chapter 9): fixed-step training, teacher-forced exact match."""

import pytest
import torch

from transformer_book.masking import padding_mask, subsequent_mask
from transformer_book.tasks import dates_task
from transformer_book.training import DATES_CONFIG, exact_match_accuracy, train_model

TINY = dict(num_layers=1, d_model=16, d_ff=32, heads=2, dropout=0.0)


def count(model):
    return sum(parameter.numel() for parameter in model.parameters())


def test_dates_config_is_small():
    from transformer_book.model import make_model

    task = dates_task()
    model = make_model(len(task.source_vocab), len(task.target_vocab), **DATES_CONFIG)
    assert count(model) <= 250_000


def test_training_is_seeded_and_runs_exactly_the_steps():
    task = dates_task()
    first, history = train_model(
        task, 6, seed=1, config=TINY, batch_size=8, log_every=2
    )
    second, _ = train_model(task, 6, seed=1, config=TINY, batch_size=8, log_every=2)
    assert [row["step"] for row in history] == [2, 4, 6]
    assert set(history[0]) >= {"step", "loss", "lr"}
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
    other, _ = train_model(task, 6, seed=2, config=TINY, batch_size=8)
    assert not torch.equal(next(first.parameters()), next(other.parameters()))
    assert not first.training  # returned in eval mode


def test_overrides_reach_make_model():
    model, _ = train_model(
        dates_task(), 1, config=TINY, batch_size=4, d_model=8, d_ff=16
    )
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
            hidden = model.decode(
                memory, padding_mask(source, 0), tokens, subsequent_mask(tokens.size(1))
            )
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
