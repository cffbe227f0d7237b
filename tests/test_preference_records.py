"""The shipped DPO runs (tools/train_grpo.py --arm dpo, seeds 0, 1, 2): each record holds what the
recipe says, and chapter 20's words about them hold on every seed; the shipped poet is seed 0's.

The chapter quotes the figures themselves through its cells (tests/prose_claims); here are the words
("on every seed", "without more repeated rhyme characters", "a few percent of held-out perplexity",
"no tuned poem repeats a verse") and the link between the weights the package ships and the record.
"""

import pytest

from transformer_book import POET_STAGES, PREFERENCE_ARMS, preference_record, pretrained_poet

SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def records():
    return {seed: preference_record("dpo", seed) for seed in SEEDS}


def test_each_record_holds_the_recipe_and_one_base_poet(records):
    for seed, record in records.items():
        assert record["arm"] == "dpo" and record["device"] == "cpu"
        assert record["training"] == {**PREFERENCE_ARMS["dpo"], "seed": seed}
        assert len(record["history"]) == PREFERENCE_ARMS["dpo"]["steps"]
        assert record["base"] == records[0]["base"], "every seed starts from the same base poet"
        assert record["tuned"]["poems"] == record["base"]["poems"] == 200


def test_the_chapters_words_hold_on_every_seed(records):
    base = records[0]["base"]
    for seed, record in records.items():
        tuned = record["tuned"]
        # far more rhyme: at least 25 points, seven sampling errors of a share of 200 poems
        assert tuned["rhyme"] >= base["rhyme"] + 0.25, seed
        # the lift is not the hack: rhyme with each rhyme character once climbs as much
        clean = tuned["rhyme"] - tuned["rhymed_by_repeat"]
        assert clean >= base["rhyme"] - base["rhymed_by_repeat"] + 0.25, seed
        # fewer poems repeat a rhyme character; those that rhyme by one stay within sampling error
        # (5 points, the bound the tool's goals set: seed 1 is 14.5% against 14.0%)
        assert tuned["repeated"] <= base["repeated"], seed
        assert tuned["rhymed_by_repeat"] <= base["rhymed_by_repeat"] + 0.05, seed
        # "a few percent" of held-out perplexity, and the form kept
        assert base["held_out_perplexity"] < tuned["held_out_perplexity"] <= 1.05 * base["held_out_perplexity"]
        assert tuned["form"] >= 0.97
        assert tuned["repeated_verse"] == 0 and tuned["copied_verses"] == 0, seed


def test_the_shipped_dpo_poet_is_seed_zeros_run(records):
    assert POET_STAGES["dpo"] == "tang_poet_dpo.pt"
    poet = pretrained_poet(stage="dpo")
    assert poet.vocab.tokens == pretrained_poet().vocab.tokens
    # the record's first poems were written by these weights, as shipped (half precision)
    assert [poet.write(seed=seed) for seed in range(5)] == records[0]["tuned"]["samples"][:5]
