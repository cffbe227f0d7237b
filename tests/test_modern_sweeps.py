"""The sweeps that chapter 16 reads (weights/modern_sweep.json, weights/length_sweep.json): they hold
every arm and seed the tools name, with the tools' settings, and what the chapter says of them holds
on every recorded run (its tables print the figures; these tests check the words about them)."""

import math

import pytest

import train_length_sweep as length_tool
import train_modern_sweep as sweep_tool
from transformer_book import sweep_record

SWEEP = sweep_record("modern_sweep")
LENGTH = sweep_record("length_sweep")


def perplexities(arm: str) -> list[float]:
    return [run["held_out_perplexity"] for run in SWEEP["runs"][arm].values()]


def halves(arm: str, seed: str) -> tuple[float, float]:
    """The perplexity of verses 1-4 (positions 0..23) and 5-8 (24..47) of one run."""
    losses = LENGTH["runs"][arm][seed]["loss_by_position"]
    return (math.exp(sum(losses[:24]) / 24), math.exp(sum(losses[24:48]) / 24) if None not in losses[24:48] else None)


@pytest.mark.parametrize("record, tool", [(SWEEP, sweep_tool), (LENGTH, length_tool)])
def test_every_arm_and_seed_is_recorded_with_the_tools_settings(record, tool):
    assert list(record["runs"]) == list(tool.ARMS) == list(record["arms"])
    seeds = [str(seed) for seed in tool.SEEDS]
    assert len(seeds) >= 3 and all(list(runs) == seeds for runs in record["runs"].values())
    assert list(record["timings"]) == list(tool.ARMS)
    training = tool.SWEEP if tool is sweep_tool else tool.TRAINING
    assert {key: record["settings"][key] for key in training} == training
    assert record["settings"]["seeds"] == list(tool.SEEDS)


def test_the_arms_are_what_the_tool_builds_and_their_sizes_match():
    counts = {arm: SWEEP["arms"][arm]["parameters"] for arm in SWEEP["arms"]}
    # "within a few percent": at most 5.1% (the GELU arm, 5.1% fewer than GPT-2's block; the
    # vocabulary of 5,501 tokens, 5,783 before the poems' variants were normalised, is a smaller
    # share of each arm than it was)
    assert all(abs(count / counts["gpt2"] - 1) < 0.06 for count in counts.values())
    assert SWEEP["arms"]["mha"]["config"]["kv_heads"] == 4
    assert SWEEP["arms"]["modern"]["config"] == sweep_tool.MODERN


def test_the_learned_table_is_scored_only_where_it_has_rows():
    for arm, runs in LENGTH["runs"].items():
        for run in runs.values():
            known = [loss for loss in run["loss_by_position"] if loss is not None]
            expected = length_tool.TRAIN_LEN - 1 if arm == "learned" else length_tool.PREDICTIONS
            assert len(known) == expected and len(run["loss_by_position"]) == 49


def test_sweep_record_refuses_other_names():
    with pytest.raises(
        ValueError,
        match=r"name must be one of \('modern_sweep', 'length_sweep'\); "
        r"got name='poet'",
    ):
        sweep_record("poet")


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def spread(arm: str) -> float:
    return max(perplexities(arm)) - min(perplexities(arm))


def test_chapter_16s_words_on_the_sweep_hold_on_the_recorded_runs():
    # "GPT-2's block is ahead of the modern one ... lower with every seed, though with one of them
    # barely" (the same seed draws the same batches for every arm)
    gaps = [modern - gpt2 for gpt2, modern in zip(perplexities("gpt2"), perplexities("modern"))]
    smallest, second = sorted(gaps)[:2]
    assert 0 < smallest < 1 < second
    # "RMSNorm -> LayerNorm changes nothing the seeds can tell apart", "grouped-query ->
    # multi-head attention ... either": the ranges overlap
    for arm in ("layernorm", "mha"):
        assert min(perplexities(arm)) < max(perplexities("modern")), arm
        assert min(perplexities("modern")) < max(perplexities(arm)), arm
    # "a learned table is a little better on average, lower with two seeds of three, within the
    # seeds' spread"
    pairs = zip(perplexities("learned"), perplexities("modern"))
    assert sum(learned < modern for learned, modern in pairs) == 2
    assert 0 < mean(perplexities("modern")) - mean(perplexities("learned")) < spread("modern")
    # "no change undone on its own brings the modern block to GPT-2's level"
    assert all(mean(perplexities(arm)) > max(perplexities("gpt2")) for arm in SWEEP["runs"] if arm != "gpt2")
    # "SwiGLU -> a GELU layer is much worse on average and unsteady"
    others = [mean(perplexities(arm)) for arm in SWEEP["runs"] if arm != "gelu"]
    assert mean(perplexities("gelu")) > max(others) + 50
    assert spread("gelu") > 5 * spread("modern")


def test_the_runs_are_shorter_than_the_poets_and_still_far_from_it():
    from transformer_book import POET_TRAINING, poet_history

    settings = SWEEP["settings"]
    poet = POET_TRAINING["steps"] * POET_TRAINING["batch_size"]
    assert settings["steps"] * settings["batch_size"] * 10 < poet
    best = min(min(perplexities(arm)) for arm in SWEEP["runs"])
    assert best > 3 * poet_history()["held_out_perplexity"]


def test_chapter_16s_words_on_length_hold_on_the_recorded_runs():
    # verses 5-8 over verses 1-4: "ALiBi is first and the sinusoids last with every seed", "NoPE
    # next", then rotary positions, "NoPE ahead of rotary positions with every seed"; each seed's
    # runs compared with the same seed's
    order = ["alibi", "none", "rotary", "sinusoidal"]
    ratios = {arm: {} for arm in order}
    for seed in LENGTH["runs"]["alibi"]:
        for arm in order:
            first, second = halves(arm, seed)
            ratios[arm][seed] = second / first
        assert 1 < ratios["alibi"][seed] < min(ratios[arm][seed] for arm in order[1:3])
        assert ratios["sinusoidal"][seed] > max(ratios[arm][seed] for arm in order[:3])
        assert halves("learned", seed)[1] is None  # "cannot be asked"
    means = [mean(list(ratios[arm].values())) for arm in order]
    assert means == sorted(means)
    nope_first = sum(ratios["none"][seed] < ratios["rotary"][seed] for seed in ratios["none"])
    assert nope_first == len(ratios["none"])
    # "within the trained length ... the learned table is best on verses 1-4, ALiBi and NoPE the
    # worst" (means over seeds)
    first_half = {arm: mean([halves(arm, seed)[0] for seed in runs]) for arm, runs in LENGTH["runs"].items()}
    ranked = sorted(first_half, key=first_half.get)
    assert ranked[0] == "learned" and set(ranked[-2:]) == {"alibi", "none"}
