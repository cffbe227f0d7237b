"""The shipped poet and Poet.write's edges: bad arguments are named, and the record that ships
beside the weights describes them. (That a seed writes the same poem on a GPU, which write
ensures by drawing on the CPU, cannot be seen on a CPU-only machine: on an H100 the shipped
poet wrote 200 of its 200 recorded poems.)"""

import pytest
import torch

from transformer_book import (
    POET_CONFIG,
    POET_TRAINING,
    CharVocabulary,
    Poet,
    perplexity,
    poem_split,
    poet_history,
    pretrained_poet,
    regular_form,
)


@pytest.fixture(scope="module")
def shipped():
    return pretrained_poet()


@pytest.mark.parametrize("temperature", [-0.5, float("nan"), "0.8", None, True])
def test_a_bad_temperature_is_named(shipped, temperature):
    with pytest.raises(ValueError, match=r"temperature must be a number >= 0 \(0 is greedy\); "
                                         rf"got {temperature!r}"):
        shipped.write(temperature=temperature)


@pytest.mark.parametrize("top_p", [0, 1.5, -0.1, "0.9", None])
def test_a_bad_top_p_is_named(shipped, top_p):
    with pytest.raises(ValueError, match=rf"top_p must be in \(0, 1\]; got top_p={top_p!r}"):
        shipped.write(top_p=top_p)


def test_greedy_and_full_nucleus_are_accepted(shipped):
    greedy = shipped.write(temperature=0)
    assert greedy == shipped.write(temperature=0, seed=7)  # greedy ignores the seed
    assert isinstance(shipped.write(top_p=1.0), str) and greedy


def test_the_shipped_poet_is_the_recipe_and_its_record(shipped):
    config = shipped.model.config
    assert {key: getattr(config, key) for key in POET_CONFIG} == POET_CONFIG
    assert shipped.vocab.tokens == CharVocabulary.from_poems(poem_split("train")).tokens
    record = poet_history()
    assert set(record) == {"training", "samples", "untrained_samples", "losses",
                           "held_out_perplexity"}
    assert record["training"] == POET_TRAINING
    assert record["losses"][-1] < record["losses"][0] / 1.5
    assert sum(map(regular_form, record["samples"])) >= 0.95 * len(record["samples"])
    assert not any(map(regular_form, record["untrained_samples"]))
    held_out = poem_split("held-out")[:100]  # the record's figure is over all 1,000
    assert 50 < perplexity(shipped.model, shipped.vocab, held_out) < 200
    assert 50 < record["held_out_perplexity"] < 200


def test_pretrained_poet_takes_a_device_and_a_poet_is_its_model_and_vocabulary(shipped):
    again = Poet(shipped.model, shipped.vocab)
    assert again.write(seed=11) == shipped.write(seed=11) == pretrained_poet("cpu").write(seed=11)
    assert next(pretrained_poet(torch.device("cpu")).model.parameters()).dtype == torch.float32
