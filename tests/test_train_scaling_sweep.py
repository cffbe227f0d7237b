"""tools/train_scaling_sweep.py and tools/speed_ladder.py (scaffolds, not run yet): the sweep's steps reach
each budget and no more than one step past it, counted with chapter 18's flops_per_token on the batches
train_lm draws; its IsoFLOP fit recovers a known law from synthetic runs; too few budgets are refused by
name; the ladder lists its rungs."""

import math

import pytest

import train_scaling_sweep as sweep
from transformer_book import PoemVocabulary, flops_per_token

POEMS = [
    "春眠不觉晓，处处闻啼鸟。",
    "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
    "白日依山尽，黄河入海流。",
] * 30


def test_steps_reach_the_budget_by_one_step():
    vocab = PoemVocabulary.from_poems(POEMS)
    config = sweep.config_of((64, 2), len(vocab))
    budget = 5e9
    steps, flops, tokens = sweep.steps_for(budget, config, POEMS, vocab)
    assert flops >= budget
    longest = max(len(vocab.encode(poem)) for poem in POEMS)
    assert flops - sweep.BATCH_SIZE * longest * flops_per_token(config, longest) < budget
    assert 0 < tokens <= steps * sweep.BATCH_SIZE * longest


def test_the_fit_recovers_a_known_law():
    def optimum(budget):
        return 0.1 * budget**0.5, 5.0 * budget**-0.05  # N_opt(C), L(C)

    runs = []
    for budget in (1e12, 3e12, 1e13):
        best_n, best_loss = optimum(budget)
        for factor in (0.25, 0.5, 1.0, 2.0, 4.0):
            n = best_n * factor
            runs.append({"budget": budget, "parameters": n, "loss": best_loss + 0.1 * math.log(factor) ** 2})
    law = sweep.fit(runs)
    assert law["loss_law"]["b"] == pytest.approx(0.05, rel=1e-6)
    assert law["size_law"]["e"] == pytest.approx(0.5, rel=1e-6)
    predicted = sweep.predict(law, 3e13)
    assert predicted["loss"] == pytest.approx(optimum(3e13)[1], rel=1e-6)
    assert predicted["parameters"] == pytest.approx(optimum(3e13)[0], rel=1e-6)


def test_one_budget_is_no_law():
    with pytest.raises(ValueError, match="a law needs at least two budgets"):
        sweep.fit([{"budget": 1e12, "parameters": n, "loss": 3.0} for n in (1e5, 2e5, 4e5)])


def test_the_speed_ladder_lists_its_rungs(capsys):
    import speed_ladder

    assert speed_ladder.main(["--plan"]) == 0
    printed = capsys.readouterr().out
    assert all(f"{rung}: " in printed for rung in speed_ladder.RUNGS)
