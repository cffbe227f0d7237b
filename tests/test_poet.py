"""The shipped poet and Poet.write's edges: bad arguments are named, and the record that ships
beside the weights describes them. (That a seed writes the same poem on a GPU, which write
ensures by drawing on the CPU, cannot be seen on a CPU-only machine: on an H100 the shipped
poet wrote 200 of its 200 recorded poems.)"""

import math

import pytest
import torch

from transformer_book import (
    GPT,
    POET_CONFIG,
    POET_TRAINING,
    GPTConfig,
    PoemVocabulary,
    Poet,
    acrostic_logits,
    decode_loop,
    decoder_only_scores,
    draw_next,
    perplexity,
    poem_losses,
    poem_split,
    poet_history,
    pretrained_poet,
    regular_form,
    train_lm,
)


@pytest.fixture(scope="module")
def shipped():
    return pretrained_poet()


@pytest.mark.parametrize("temperature", [-0.5, float("nan"), "0.8", None, True])
def test_a_bad_temperature_is_named(shipped, temperature):
    with pytest.raises(
        ValueError,
        match=r"temperature must be a number >= 0 \(0 is greedy\); "
        rf"got {temperature!r}",
    ):
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
    assert shipped.vocab.tokens == PoemVocabulary.from_poems(poem_split("train")).tokens
    record = poet_history()
    assert set(record) == {"training", "samples", "untrained_samples", "losses", "held_out_perplexity"}
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


def tiny_poet():
    """A poet of 14 tokens whose weights are the same on every machine (drawn in float64 on the
    CPU): marks and <s> are likely enough that verses close, acrostic heads are forced and poems
    end, and its logits are far enough apart that another kernel path draws the same tokens."""
    vocab = PoemVocabulary("春花秋月江山如画白日依尽，。")
    model = GPT(GPTConfig(len(vocab), max_len=64, d_model=32, heads=4, layers=2))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            drawn = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
            parameter.copy_((drawn * 0.2).float())
    return Poet(model.eval(), vocab)


# (prompt, temperature, top_p, top_k, seed, acrostic, the poem), one row a case: written by Poet.write as it was
# at commit 24ad09d01e, before write became a plain loop with acrostic_logits, by running
# that code on tiny_poet().
# fmt: off
RECORDED = [
    ("", 0.8, 0.9, None, 0, False, "尽如白山尽日白月日花月尽。春白。江花月尽月月画江。江白如山尽如江月日江依花江"),
    ("", 0.8, 0.9, None, 1, False, "。日"),
    ("", 0.8, 0.9, None, 7, False, "，"),
    ("", 1.0, 1.0, None, 0, False, "尽如白山尽日白月日花月尽。春白。江花月尽月月春江。江白如山尽如江依日江依花江"),
    ("", 1.0, 1.0, None, 1, False, "花日"),
    ("", 1.0, 1.0, None, 7, False, "，"),
    ("", 0, 0.9, None, 0, False, "月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("", 0, 0.9, None, 1, False, "月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("", 0, 0.9, None, 7, False, "月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("", 1.5, 0.7, 3, 0, False, "月。月月月月月。月月月。。。月。。。月月月月。月。。"),
    ("", 1.5, 0.7, 3, 1, False, "。"),
    ("", 1.5, 0.7, 3, 7, False, "月日"),
    ("", 0.5, 1.0, 2, 0, False, "月月月月月月月月月月月。月月月"),
    ("", 0.5, 1.0, 2, 1, False, "。"),
    ("", 0.5, 1.0, 2, 7, False, "月月。月月月画月"),
    ("白日依山尽，", 0.8, 0.9, None, 0, False, "白日依山尽，江如山山尽日白月日花月尽月春白。江花月画月月春江。江白山山尽月江月日江月花江"),
    ("白日依山尽，", 0.8, 0.9, None, 1, False, "白日依山尽，花日"),
    ("白日依山尽，", 0.8, 0.9, None, 7, False, "白日依山尽，，"),
    ("白日依山尽，", 1.0, 1.0, None, 0, False, "白日依山尽，江如山山尽日白月日花月尽江春白。江花月画月月春江。江白如山尽花江依日江依花江"),
    ("白日依山尽，", 1.0, 1.0, None, 1, False, "白日依山尽，花日"),
    ("白日依山尽，", 1.0, 1.0, None, 7, False, "白日依山尽，，"),
    ("白日依山尽，", 0, 0.9, None, 0, False, "白日依山尽，月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("白日依山尽，", 0, 0.9, None, 1, False, "白日依山尽，月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("白日依山尽，", 0, 0.9, None, 7, False, "白日依山尽，月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("白日依山尽，", 1.5, 0.7, 3, 0, False, "白日依山尽，月月月月月月月。月月月"),
    ("白日依山尽，", 1.5, 0.7, 3, 1, False, "白日依山尽，花"),
    ("白日依山尽，", 1.5, 0.7, 3, 7, False, "白日依山尽，月"),
    ("白日依山尽，", 0.5, 1.0, 2, 0, False, "白日依山尽，月月月月月月月月月月月"),
    ("白日依山尽，", 0.5, 1.0, 2, 1, False, "白日依山尽，花"),
    ("白日依山尽，", 0.5, 1.0, 2, 7, False, "白日依山尽，月"),
    ("春", 0.8, 0.9, None, 0, False, "春江，山山尽日白月日花月尽江春白。江花月画月月春江。江白如山尽花江依日江依花江"),
    ("春", 0.8, 0.9, None, 1, False, "春花日"),
    ("春", 0.8, 0.9, None, 7, False, "春，"),
    ("春", 1.0, 1.0, None, 0, False, "春江如山山尽日白月日花月尽江春白。江花月画月月春江。江白如山尽花江依日江依花江"),
    ("春", 1.0, 1.0, None, 1, False, "春花日"),
    ("春", 1.0, 1.0, None, 7, False, "春，"),
    ("春", 0, 0.9, None, 0, False, "春月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("春", 0, 0.9, None, 1, False, "春月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("春", 0, 0.9, None, 7, False, "春月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("春", 1.5, 0.7, 3, 0, False, "春月。月月月月月月月月画"),
    ("春", 1.5, 0.7, 3, 1, False, "春花日"),
    ("春", 1.5, 0.7, 3, 7, False, "春月"),
    ("春", 0.5, 1.0, 2, 0, False, "春月月月月月月月月月月月。月"),
    ("春", 0.5, 1.0, 2, 1, False, "春"),
    ("春", 0.5, 1.0, 2, 7, False, "春月"),
    ("春", 0.8, 0.9, None, 0, True, "春如山山尽日白月日花月尽。"),
    ("春", 0.8, 0.9, None, 3, True, "春花花江月，"),
    ("春", 1.2, 1.0, None, 0, True, "春如山山尽日白春日花月尽。"),
    ("春", 1.2, 1.0, None, 3, True, "春花花江月，"),
    ("春", 0, 0.9, None, 0, True, "春月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("春", 0, 0.9, None, 3, True, "春月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("春", 1.0, 0.95, 4, 0, True, "春花月月日日月月日月画日。"),
    ("春", 1.0, 0.95, 4, 3, True, "春花花江月日。"),
    ("江山如画", 0.8, 0.9, None, 0, True, "江如山山尽日白月日花月尽。山白。如花月尽月月画江。画白如山尽花江月日江依花江画尽山花尽月白日月江月，"),
    ("江山如画", 0.8, 0.9, None, 3, True, "江花花江月，山月月月江画白。如。画春依江月花。"),
    ("江山如画", 1.2, 1.0, None, 0, True, "江如山山尽日白春日花月尽。山白。如花月尽月春春江。画白如山尽如江依日江依花江画尽山白秋月白日。"),
    ("江山如画", 1.2, 1.0, None, 3, True, "江花花江月，山月月依江画白。如。画春依江秋花。"),
    ("江山如画", 0, 0.9, None, 0, True, "江月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("江山如画", 0, 0.9, None, 3, True, "江月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("江山如画", 1.0, 0.95, 4, 0, True, "江花月月日日月月日月画。山。如。画月月月月月江月。"),
    ("江山如画", 1.0, 0.95, 4, 3, True, "江花花江月日。山月月江画月。如。画月日江月日。"),
    ("春花秋月江山如画", 0.8, 0.9, None, 0, True, "春如山山尽日白月日花月尽。花白。秋花月尽月月春江。月白如山尽如江月日江依花江画尽山花尽月白日月江月，江白月尽，山画画春日画尽春"),
    ("春花秋月江山如画", 0.8, 0.9, None, 3, True, "春花花江月，花月月月江画白。秋。月春依江月花。江花。山花日如画，如月。画月如花月白江江月画日。"),
    ("春花秋月江山如画", 1.2, 1.0, None, 0, True, "春如山山尽日白春日花月尽。花白。秋花月尽月春春江。月白如山尽如江依日江依花江画尽山白秋月白日。江月，山白月尽，如画画春日画尽春"),
    ("春花秋月江山如画", 1.2, 1.0, None, 3, True, "春花花江月，花月月依江画白。秋。月春依江秋花。江花。山花如如画，如月。画秋如花月白依江月画日。"),
    ("春花秋月江山如画", 0, 0.9, None, 0, True, "春月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("春花秋月江山如画", 0, 0.9, None, 3, True, "春月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("春花秋月江山如画", 1.0, 0.95, 4, 0, True, "春花月月日日月月日月画日。花花。秋月月月月月江月。月日。江月月花江日江月江日画日日花日月月日月画月日月。山。如日画月日日画月。"),
    ("春花秋月江山如画", 1.0, 0.95, 4, 3, True, "春花花江月日。花月月江画江。秋。月月日江月日。江花。山日日画画花月月。如月日江月日江月月月日月月日江月日月月江月月月月日日。画"),
    ("白日", 0.8, 0.9, None, 0, True, "白如山山尽日白月日花月尽。日白。"),
    ("白日", 0.8, 0.9, None, 3, True, "白花花江月，日月月月江画白。"),
    ("白日", 1.2, 1.0, None, 0, True, "白如山山尽日白春日花月尽。日白。"),
    ("白日", 1.2, 1.0, None, 3, True, "白花花江月，日月月依江画白。"),
    ("白日", 0, 0.9, None, 0, True, "白月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("白日", 0, 0.9, None, 3, True, "白月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月月"),
    ("白日", 1.0, 0.95, 4, 0, True, "白花月月江日月月日花月日。日月。"),
    ("白日", 1.0, 0.95, 4, 3, True, "白花花江月日。日月月江画日。"),
]
# fmt: on


@pytest.mark.parametrize("case", RECORDED, ids=lambda case: f"{case[0] or 'free'}-{case[1]}")
def test_write_writes_the_poems_it_wrote_before_acrostic_became_a_logit_edit(case):
    prompt, temperature, top_p, top_k, seed, acrostic, poem = case
    poet = tiny_poet()
    assert poet.write(prompt, temperature=temperature, top_p=top_p, seed=seed, acrostic=acrostic, top_k=top_k) == poem


def test_acrostic_logits_forces_the_head_where_a_verse_begins_and_forbids_an_early_end():
    vocab = PoemVocabulary("春花秋月，。")
    ids = vocab.ids
    logits = torch.zeros(len(vocab))
    first = acrostic_logits(logits, [], "春秋", vocab)  # nothing written: verse 1 begins
    assert first.isfinite().nonzero().flatten().tolist() == [ids["春"]]
    middle = acrostic_logits(logits, [ids["春"], ids["花"]], "春秋", vocab)
    assert middle[vocab.boundary_id] == float("-inf")  # no end before the last head
    assert middle.isfinite().sum() == len(vocab) - 1 and logits.isfinite().all()  # a copy
    second = acrostic_logits(logits, [ids["春"], ids["，"]], "春秋", vocab)
    assert second.isfinite().nonzero().flatten().tolist() == [ids["秋"]]
    done = acrostic_logits(logits, [ids["春"], ids["，"], ids["秋"], ids["。"]], "春秋", vocab)
    assert done.isfinite().nonzero().flatten().tolist() == [vocab.boundary_id]  # the end
    inside_last = acrostic_logits(logits, [ids["春"], ids["，"], ids["秋"]], "春秋", vocab)
    assert inside_last[vocab.boundary_id] == float("-inf")  # its verse must close first
    assert inside_last.isfinite().sum() == len(vocab) - 1


def test_poem_losses_score_each_poem_and_add_up_to_the_perplexity():
    poet = tiny_poet()
    poems = ["春花秋月江，山如画白日。", "白日依山尽，", "春花秋月江，山如画白日。"]
    sums, counts = poem_losses(poet.model, poet.vocab, poems)
    assert sums.shape == counts.shape == (3,) and sums.dtype == torch.float64
    assert counts.tolist() == [13, 7, 13]  # every character and the closing <s>
    assert sums[0] == sums[2]  # one poem, one score, wherever it stands
    whole = math.exp(sums.sum() / counts.sum())
    assert whole == pytest.approx(perplexity(poet.model, poet.vocab, poems), rel=1e-5)
    alone = poem_losses(poet.model, poet.vocab, poems[1:2])[0]
    assert alone.item() == pytest.approx(sums[1].item(), rel=1e-5)


def test_train_lm_evaluates_every_few_steps_without_changing_the_training():
    vocab = PoemVocabulary("春花秋月江山如画白日依尽，。")
    poems = ["春花秋月江，山如画白日。", "白日依山尽，春花秋月江。"] * 4

    def trained(evaluate):
        torch.manual_seed(0)
        model = GPT(GPTConfig(len(vocab), max_len=16, d_model=16, heads=2, layers=1))
        return train_lm(model, vocab, poems, steps=7, batch_size=4, evaluate=evaluate, eval_every=3)

    seen = []
    with_evaluation = trained(lambda step, model: seen.append((step, model.training)))
    assert seen == [(0, True), (3, True), (6, True), (7, True)]
    assert with_evaluation == trained(None)  # the same batches, the same losses
    with pytest.raises(ValueError, match=r"eval_every must be a positive int; got eval_every=0"):
        train_lm(
            GPT(GPTConfig(len(vocab), max_len=16, d_model=16, heads=2, layers=1)), vocab, poems, steps=2, eval_every=0
        )


def test_a_prompt_longer_than_the_poet_is_refused_by_name():
    poet = tiny_poet()  # max_len 64: <s> and at most 63 characters
    assert len(poet.write("春" * 63, temperature=0)) == 63  # a full prompt: nothing to add
    with pytest.raises(ValueError, match=r"prompt '春+' is 64 characters; the poet writes at most 63"):
        poet.write("春" * 64)


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_the_decoder_only_scorer_decodes_the_same_with_and_without_the_cache(temperature):
    poet = tiny_poet()
    start = torch.tensor([[poet.vocab.boundary_id]] * 2)  # two sequences from <s>

    def pick(scores, _):
        generator = pick.generator
        return draw_next(scores, temperature, top_p=0.9, generator=generator)

    written = []
    for caches in (poet.model.new_caches(), None):
        pick.generator = torch.Generator().manual_seed(0)
        scores = decoder_only_scores(poet.model, caches)
        written.append(decode_loop(scores, start, 20, poet.vocab.boundary_id, pick))
    assert written[0].shape[1] > 1 and torch.equal(*written)
