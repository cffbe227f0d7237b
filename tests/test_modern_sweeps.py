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


ARMS_AND_RESCALED = [(arm, "") for arm in LENGTH["runs"]] + [("interpolated", "interpolated"), ("ntk", "ntk")]


def halves(arm: str, seed: str, rescaled: str = "") -> tuple[float, float]:
    """The perplexity of verses 1-4 (positions 0..23) and 5-8 (24..47) of one run (``rescaled``:
    a rotary run read with its angles stretched)."""
    if arm in ("interpolated", "ntk"):
        arm, rescaled = "rotary", arm
    run = LENGTH["runs"][arm][seed]
    losses = run[f"loss_by_position_{rescaled}" if rescaled else "loss_by_position"]
    return (math.exp(sum(losses[:24]) / 24), math.exp(sum(losses[24:48]) / 24) if None not in losses[24:48] else None)


@pytest.mark.parametrize("record, tool", [(SWEEP, sweep_tool), (LENGTH, length_tool)])
def test_every_recorded_arm_has_every_seed_and_its_settings(record, tool):
    # the tools run a subset of their arms (--arms) at a budget of their own (--steps,
    # --batch-size); the record says which
    assert set(record["runs"]) <= set(tool.ARMS) and list(record["runs"]) == list(record["arms"])
    seeds = [str(seed) for seed in record["settings"]["seeds"]]
    assert len(seeds) >= 3 and all(list(runs) == seeds for runs in record["runs"].values())
    assert list(record["timings"]) == list(record["runs"])
    assert {"steps", "batch_size", "lr"} <= set(record["settings"])


def test_the_tools_default_budget_is_the_shipped_poets():
    from transformer_book import POET_TRAINING

    for budget in (sweep_tool.SWEEP, length_tool.TRAINING):
        assert budget["steps"] == POET_TRAINING["steps"] == 800
        assert budget["batch_size"] == POET_TRAINING["batch_size"] == 64


def test_the_learning_rate_grid_is_the_two_blocks_with_the_sweeps_settings():
    from transformer_book import LR_GRID

    assert SWEEP["settings"]["lr"] not in LR_GRID["modern_sweep"]  # the poet's rate: the main record
    for lr in LR_GRID["modern_sweep"]:
        record = sweep_record("modern_sweep", lr=lr)
        assert record["settings"] == {**SWEEP["settings"], "lr": lr}, lr
        assert record["arms"] == {arm: SWEEP["arms"][arm] for arm in ("gpt2", "modern")}, lr
        assert list(record["runs"]) == ["gpt2", "modern"]


def test_chapter_16s_words_on_the_learning_rate_grid_hold():
    from transformer_book import LR_GRID

    poet = SWEEP["settings"]["lr"]
    rates = sorted([poet, *LR_GRID["modern_sweep"]])
    low, high = rates[0], rates[-1]
    runs = {lr: SWEEP if lr == poet else sweep_record("modern_sweep", lr=lr) for lr in rates}
    scores = {
        (arm, lr): [run["held_out_perplexity"] for run in runs[lr]["runs"][arm].values()]
        for arm in ("gpt2", "modern")
        for lr in rates
    }
    best = {arm: min(rates, key=lambda lr: mean(scores[arm, lr])) for arm in ("gpt2", "modern")}
    # "GPT-2's block has its lowest mean at the poet's rate; the modern block at 1e-3, where its
    # seeds also agree far more"; "at 1e-2 both are worse than at the poet's rate on average"
    assert best == {"gpt2": poet, "modern": low}
    spread_at = {lr: max(scores["modern", lr]) - min(scores["modern", lr]) for lr in (low, poet)}
    assert spread_at[low] < 0.5 * spread_at[poet]
    assert all(mean(scores[arm, high]) > mean(scores[arm, poet]) for arm in ("gpt2", "modern"))

    def worse(modern, gpt2):  # seed by seed: the same batches
        return sum(m > g for m, g in zip(modern, gpt2))

    # "still worse than GPT-2's block with 2 of 3 seeds, at 1e-3 as at 1e-2"; "each block at its
    # own best rate, it is worse with 2 of 3 seeds"; "part of the gap, not all of it"
    assert worse(scores["modern", low], scores["gpt2", low]) == 2
    assert worse(scores["modern", high], scores["gpt2", high]) == 2
    assert worse(scores["modern", low], scores["gpt2", poet]) == 2
    assert mean(scores["gpt2", poet]) < mean(scores["modern", low]) < mean(scores["modern", poet])


def test_the_arms_are_what_the_tool_builds_and_their_sizes_match():
    counts = {arm: SWEEP["arms"][arm]["parameters"] for arm in SWEEP["arms"]}
    # "within a few percent": the modern block has 4.2% fewer than GPT-2's block
    assert all(abs(count / counts["gpt2"] - 1) < 0.06 for count in counts.values())
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
    with pytest.raises(
        ValueError,
        match=r"lr must be None \(the poet's rate\) or one of \(0.001, 0.01\) for "
        r"modern_sweep; got lr=0.003",
    ):
        sweep_record("modern_sweep", lr=0.003)  # the poet's rate is the main record's
    with pytest.raises(ValueError, match=r"one of \(\) for length_sweep; got lr=0.001"):
        sweep_record("length_sweep", lr=0.001)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def spread(arm: str) -> float:
    return max(perplexities(arm)) - min(perplexities(arm))


@pytest.fixture(scope="module")
def count_tables():
    """The chapter's yardsticks: counts by position in the poem (held-out poems), and by position
    within a verse (four-verse training poems, eight-verse held-out poems), add-one."""
    from transformer_book import PoemVocabulary, count_table_losses, poem_split

    train, held_out = poem_split("train", by="meaning"), poem_split("held-out", by="meaning")
    vocab = PoemVocabulary.from_poems(train)
    losses, seen = count_table_losses(vocab, train, held_out)
    poems = math.exp(losses.sum().item() / seen.sum().item())
    four = [poem for poem in train if length_tool.verses(poem) == 4]
    eight = [poem for poem in held_out if length_tool.verses(poem) == 8]
    losses, seen = count_table_losses(vocab, four, eight, period=6, upto=24)
    by_position = (losses.sum(0) / seen.sum(0)).tolist()
    verses = tuple(math.exp(sum(by_position[a : a + 24]) / 24) for a in (0, 24))
    return poems, verses


def test_chapter_16s_words_on_the_sweep_hold_on_the_recorded_runs(count_tables):
    poems, _ = count_tables
    gpt2, modern = perplexities("gpt2"), perplexities("modern")
    # "the modern block is worse with every seed" (the same seed draws the same batches)
    assert all(mine < theirs for mine, theirs in zip(gpt2, modern))
    # "roughly half below the count table's 286.0 (the worst seed -48%)"
    assert max(gpt2 + modern) <= 0.53 * poems
    # "the held-out curves have flattened, the last 50 steps taking off 1%"
    for arm, runs in SWEEP["runs"].items():
        for run in runs.values():
            (_, before), (_, last) = run["held_out_curve"][-2:]
            assert 0 <= 1 - last / before < 0.02 and last == run["held_out_perplexity"], arm
    # "the seeds spread as widely as the blocks differ"
    assert max(gpt2) - min(gpt2) > mean(modern) - mean(gpt2)
    # one change undone at a time, seed by seed against the modern block (the same batches): "a
    # learned position table ... lower with every seed ... the lowest mean of all six arms";
    # "multi-head attention ... lower with every seed too"; LayerNorm and a GELU layer "lower
    # with 2 of 3 seeds and higher with the third": undecided; the learned table "still not
    # GPT-2's block" (not lower with every seed)
    lower = {arm: sum(mine < theirs for mine, theirs in zip(perplexities(arm), modern)) for arm in SWEEP["runs"]}
    assert lower["learned"] == lower["mha"] == 3 and lower["layernorm"] == lower["gelu"] == 2
    assert min(SWEEP["runs"], key=lambda arm: mean(perplexities(arm))) == "learned"
    assert not all(mine < theirs for mine, theirs in zip(perplexities("learned"), gpt2))


def test_chapter_16s_words_on_length_against_the_verse_counts(count_tables):
    _, (first, second) = count_tables
    runs = LENGTH["runs"]
    means = {
        arm: [mean([halves(arm, seed, key)[part] for seed in runs["rotary" if key else arm]]) for part in (0, 1)]
        for arm, key in ARMS_AND_RESCALED
        if arm != "learned"
    }
    # "the learned table and rotary positions overfit ... lowest at step 300 and at steps 450 to
    # 500, then rise"; "the sinusoids, ALiBi and NoPE are lowest at or next to the last step, 750
    # or 800"
    for arm in runs:
        for run in runs[arm].values():
            curve = run["held_out_curve"]
            assert run["four_verse_perplexity"] == min(value for _, value in curve)
            (_, before), (_, last) = curve[-2:]
            if arm in ("learned", "rotary"):
                assert run["best_step"] <= 500 and last > run["four_verse_perplexity"], arm
            else:
                assert run["best_step"] >= 750 and abs(1 - last / before) < 0.01, arm  # flat
    # "reads verses 5-8 as verses 1-4"; "every scheme is more than 20% below it with every seed"
    assert abs(second / first - 1) < 0.03
    for arm in runs:
        assert all(halves(arm, seed)[0] < 0.8 * first for seed in runs[arm]), arm
    # "past it, every scheme is far worse than the counts, with every seed"; "the sinusoids fail
    # completely"; ALiBi the lowest mean, then rotary, then NoPE, the ratios in the same order
    for arm in runs:
        if arm != "learned":
            assert all(halves(arm, seed)[1] > 1.4 * second for seed in runs[arm]), arm
    assert min(halves("sinusoidal", seed)[1] for seed in runs["sinusoidal"]) > 3 * max(
        halves(arm, seed)[1] for arm in ("rotary", "alibi", "none") for seed in runs[arm]
    )
    assert means["alibi"][1] < means["rotary"][1] < means["none"][1] < means["sinusoidal"][1]
    ratios = {arm: mean([halves(arm, s)[1] / halves(arm, s)[0] for s in runs["rotary"]]) for arm in means}
    assert ratios["alibi"] < ratios["rotary"] < ratios["none"]

    # "but seed by seed they cross": the runs do not rank ALiBi, rotary positions and NoPE
    def below(mine, theirs):
        return sum(halves(mine, s)[1] < halves(theirs, s)[1] for s in runs["rotary"])

    assert below("alibi", "rotary") == 2 and below("none", "rotary") == 1
    # interpolated without training: verses 1-4 much worse, with every seed; the ratio looks best
    for seed in runs["rotary"]:
        assert halves("rotary", seed, "interpolated")[0] > 2 * halves("rotary", seed)[0]
    assert ratios["interpolated"] < min(ratio for arm, ratio in ratios.items() if arm != "interpolated")
    # NTK-aware: verses 1-4 "nearly as they were"; verses 5-8 better on average, below plain rotary
    # with 2 of 3 seeds, "level with ALiBi on average", "still more than twice the counts"
    assert abs(means["ntk"][0] / means["rotary"][0] - 1) < 0.05
    assert means["ntk"][1] < means["rotary"][1]
    assert below("ntk", "rotary") == 2
    assert abs(means["ntk"][1] / means["alibi"][1] - 1) < 0.02 and means["ntk"][1] > 2 * second


def test_count_table_losses_counts_by_position_and_refuses_bad_input():
    from transformer_book import PoemVocabulary, count_table_losses

    train = ["春花秋月。", "春风秋雨。"]
    vocab = PoemVocabulary.from_poems(train)
    losses, mask = count_table_losses(vocab, train, ["春花秋雨。"])
    size = len(vocab)
    # position 1 (predicting the second character): 花 once, 风 once, of 2, add-one
    assert losses[0, 1].item() == pytest.approx(-math.log(2 / (2 + size)))
    assert losses[0, 3].item() == pytest.approx(-math.log(2 / (2 + size)))  # 雨 once of 2
    assert losses[0, 0].item() == pytest.approx(-math.log(3 / (2 + size)))  # 春 twice of 2
    assert mask.all() and losses.shape == (1, 6)
    by_verse, _ = count_table_losses(vocab, train, ["春花秋雨。春花秋雨。"], period=3)
    # positions 0 and 3 share one row of counts: 春, 春 (position 0), 月, 雨 (position 3)
    assert by_verse[0, 0].item() == pytest.approx(-math.log(3 / (4 + size)))
    assert by_verse[0, 3].item() == pytest.approx(-math.log(2 / (4 + size)))
    with pytest.raises(ValueError, match="train is empty"):
        count_table_losses(vocab, [], train)
    with pytest.raises(ValueError, match="period must be"):
        count_table_losses(vocab, train, train, period=0)
    with pytest.raises(ValueError, match="smoothing must be"):
        count_table_losses(vocab, train, train, smoothing=-1)


def test_the_runs_have_the_poets_budget_and_start_alike():
    from transformer_book import POET_TRAINING, poet_history

    settings = SWEEP["settings"]
    assert (settings["steps"], settings["batch_size"]) == (POET_TRAINING["steps"], POET_TRAINING["batch_size"])
    assert "sqrt(2 * layers), in every arm" in settings["init"]
    # "GPT-2's block with seed 0 is the shipped poet's recipe, and it scores what the shipped poet scores"
    assert SWEEP["runs"]["gpt2"]["0"]["held_out_perplexity"] == pytest.approx(
        poet_history()["held_out_perplexity"], abs=2e-4
    )
