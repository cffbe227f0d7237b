"""Teaching the poet (chapter 19): instructions as a fixed-length prefix, the prompt masked out of the
loss, the vocabulary extended without moving what the poet knows, and the shipped runs' records."""

from __future__ import annotations

import collections
import copy

import pytest
import torch

from transformer_book import (
    CLOSE,
    FILLER,
    GPT,
    HELD_OUT_KEYWORDS,
    KEYWORD_PLACES,
    OPEN,
    PAIR_SHARES,
    PREFIX,
    SFT_ARMS,
    SFT_PAIRS,
    SFT_RECORD,
    VERSE,
    GPTConfig,
    LoRALinear,
    PoemVocabulary,
    Poet,
    adapters_of,
    add_lora,
    causal_lm_loss,
    extend_vocabulary,
    follow,
    follows,
    instructable_poet,
    instruction,
    instruction_pairs,
    load_adapters,
    load_record,
    lora_poet,
    poem_split,
    pretrained_poet,
    prompt_batch,
    regular_form,
    sft_record_name,
    shift_positions,
    train_sft,
)

QUATRAIN = "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。"


def tiny_poet(seed=0):
    vocab = PoemVocabulary(set(QUATRAIN + "春花秋月雪含句藏四八"))
    torch.manual_seed(seed)
    return Poet(GPT(GPTConfig(len(vocab), max_len=40, d_model=16, heads=2, layers=1)).eval(), vocab)


def test_every_instruction_fills_the_prefix_with_reserved_characters():
    prompts = [instruction("keyword", "月"), instruction("verses", 8), instruction("acrostic", "春花秋月")]
    assert prompts == ["　　　【含月】", "　　　【八句】", "【藏春花秋月】"]
    assert all(len(p) == PREFIX for p in prompts)
    corpus = "".join(poem_split("train"))
    assert not set(OPEN + CLOSE + FILLER) & set(corpus)  # reserved: no poem holds them


@pytest.mark.parametrize(
    ("kind", "argument", "message"),
    [
        ("keyword", "月光", "one character"),
        ("keyword", "，", "one character"),
        ("verses", 6, "4 or 8"),
        ("acrostic", "春花秋", "4 characters"),
        ("rhyme", "月", "kind must be one of"),
    ],
)
def test_bad_instructions_are_refused_by_name(kind, argument, message):
    with pytest.raises(ValueError, match=message):
        instruction(kind, argument)


def test_follows_checks_each_kind_by_rule():
    assert follows("keyword", "河", QUATRAIN) and not follows("keyword", "月", QUATRAIN)
    assert follows("verses", 4, QUATRAIN) and not follows("verses", 8, QUATRAIN)
    assert follows("acrostic", "白黄欲更", QUATRAIN) and not follows("acrostic", "白黄欲上", QUATRAIN)
    with pytest.raises(ValueError, match="kind"):
        follows("mood", "乡", QUATRAIN)


def test_pairs_are_true_of_their_poems_and_never_ask_for_a_held_out_keyword():
    pairs = instruction_pairs(poem_split("train")[:3000], 600, seed=1, held_out=HELD_OUT_KEYWORDS)
    assert len(pairs) == 600
    kinds = {"含": "keyword", "句": "verses", "藏": "acrostic"}
    counts = collections.Counter()
    for prompt, poem in pairs:
        body = prompt.lstrip(FILLER)[1:-1]
        kind = kinds[body[0]] if body[0] in "含藏" else "verses"
        argument = {"keyword": body[1:], "acrostic": body[1:], "verses": {"四": 4, "八": 8}.get(body[0])}[kind]
        assert regular_form(poem) and follows(kind, argument, poem), (prompt, poem)
        assert kind == "verses" or not set(argument) & set(HELD_OUT_KEYWORDS)
        counts[kind] += 1
        if kind == "keyword":  # the poem's first character, so that the poet learns to open with it
            assert argument == poem[0]
    assert set(counts) == set(kinds.values())
    for kind, share in PAIR_SHARES.items():
        assert abs(counts[kind] / 600 - share) < 0.08, (kind, counts)
    with pytest.raises(ValueError, match="count"):
        instruction_pairs(poem_split("train"), 0)
    with pytest.raises(ValueError, match="no regular poem"):
        instruction_pairs(["春眠不觉晓。"], 1)
    with pytest.raises(ValueError, match="shares must give each of"):
        instruction_pairs(poem_split("train")[:100], 1, shares={"keyword": 1.0})
    with pytest.raises(ValueError, match="keyword_at must be one of .* got 'last'"):
        instruction_pairs(poem_split("train")[:100], 1, keyword_at="last")


@pytest.mark.parametrize("keyword_at", KEYWORD_PLACES)
def test_a_keyword_sits_where_keyword_at_says(keyword_at):
    only_keywords = {"keyword": 1.0, "acrostic": 0.0, "verses": 0.0}
    pairs = instruction_pairs(
        poem_split("train")[:2000], 400, seed=3, held_out=HELD_OUT_KEYWORDS, shares=only_keywords, keyword_at=keyword_at
    )
    where = collections.Counter()
    for prompt, poem in pairs:
        keyword, verses = prompt[-2], VERSE.findall(poem)
        assert keyword in poem and keyword not in HELD_OUT_KEYWORDS + "，。？"
        where["first" if keyword == poem[0] else "first verse" if keyword in verses[0] else "later"] += 1
    if keyword_at == "first":
        assert where == {"first": 400}
    elif keyword_at == "first verse":  # one of the verse's five characters, the first among them
        assert where["later"] == 0 and 40 < where["first"] < 160
    else:  # any character of the poem: most are in a later verse
        assert where["later"] > 200


def test_the_prompt_is_masked_and_the_poem_kept():
    poet = extend_vocabulary(tiny_poet(), OPEN + CLOSE + FILLER)
    pairs = [(instruction("keyword", "河"), QUATRAIN), (instruction("verses", 4), QUATRAIN[:12])]
    tokens, labels = prompt_batch(poet.vocab, pairs)
    _, unmasked = prompt_batch(poet.vocab, pairs, mask_prompt=False)
    assert torch.equal(unmasked, tokens)
    vocab = poet.vocab
    for row, (prompt, poem) in enumerate(pairs):
        kept = [t for t in labels[row].tolist() if t != vocab.pad_id]
        assert kept == [vocab.boundary_id, *vocab.encode(poem, boundaries=False), vocab.boundary_id]
        assert (labels[row, 1 : 1 + PREFIX] == vocab.pad_id).all()


def test_extending_the_vocabulary_keeps_every_old_logit():
    poet = tiny_poet()
    extended = extend_vocabulary(poet, OPEN + CLOSE + FILLER)
    assert len(extended.vocab) == len(poet.vocab) + 3
    old = poet.vocab.batch([QUATRAIN])
    new = extended.vocab.batch([QUATRAIN])
    moved = [extended.vocab.ids[token] for token in poet.vocab.tokens]
    with torch.no_grad():
        assert torch.allclose(extended.model(new)[..., moved], poet.model(old), atol=1e-6)


def test_shifting_the_positions_moves_the_rows_past_the_prefix():
    poet = tiny_poet()
    before = poet.model.positions.weight.detach().clone()  # (40, 16)
    shift_positions(poet, prefix=7)
    after = poet.model.positions.weight
    assert torch.equal(after[0], before[0]) and torch.equal(after[1:8], before[33:40])
    assert torch.equal(after[8:], before[1:33])
    for bad in (0, 39):
        with pytest.raises(ValueError, match="prefix"):
            shift_positions(poet, prefix=bad)


def test_the_shifted_poet_reads_a_prompted_poem_as_the_base_reads_it_bare():
    base, extended = pretrained_poet(), extend_vocabulary(pretrained_poet(), OPEN + CLOSE + FILLER)
    pairs = instruction_pairs(poem_split("train")[:500], 32, seed=2, held_out=HELD_OUT_KEYWORDS)

    def loss(poet, pairs):
        tokens, labels = prompt_batch(poet.vocab, pairs)
        with torch.no_grad():
            return causal_lm_loss(poet.model(tokens), labels, poet.vocab.pad_id).item()

    bare = loss(base, [("", poem) for _, poem in pairs])
    unshifted = loss(extended, pairs)  # the poem 7 positions later than the poet ever saw it
    shifted = loss(shift_positions(extended), pairs)
    assert shifted < bare + 0.6 and unshifted > bare + 2.0, (bare, shifted, unshifted)


def test_adapters_load_back_into_a_fresh_poet():
    poet = extend_vocabulary(tiny_poet(), OPEN + CLOSE + FILLER)
    fresh, spare = copy.deepcopy(poet), copy.deepcopy(poet)
    torch.manual_seed(1)
    add_lora(poet.model, rank=2, alpha=4)
    with torch.no_grad():
        for module in poet.model.modules():
            if isinstance(module, LoRALinear):
                module.lora_B.normal_()
    tokens = poet.vocab.batch([QUATRAIN])
    load_adapters(fresh, adapters_of(poet.model), rank=2, alpha=4)
    with torch.no_grad():
        assert torch.equal(fresh.model(tokens), poet.model(tokens))
    with pytest.raises(ValueError, match="adapters and the model's layers differ"):
        load_adapters(spare, {}, rank=2, alpha=4)


def test_the_shipped_adapters_load_on_the_instructable_poet():
    tuned, start = lora_poet(), instructable_poet()
    record = load_record(SFT_RECORD.format(arm="lora"))
    adapters = adapters_of(tuned.model)
    assert sum(p["A"].numel() + p["B"].numel() for p in adapters.values()) == record["trained_parameters"]
    assert all(pair["B"].abs().max() > 0 for pair in adapters.values())
    assert tuned.vocab.tokens == start.vocab.tokens


def test_sft_trains_through_the_one_loop_and_lowers_the_loss():
    poet = extend_vocabulary(tiny_poet(), OPEN + CLOSE + FILLER)
    pairs = [(instruction("keyword", "河"), QUATRAIN)] * 4
    losses = train_sft(copy.deepcopy(poet), pairs, steps=15, batch_size=4, lr=1e-2)
    assert len(losses) == 15 and losses[-1] < 0.8 * losses[0]
    with pytest.raises(ValueError, match="steps"):
        train_sft(poet, pairs, steps=0)
    with pytest.raises(ValueError, match="pairs is empty"):
        train_sft(poet, [], steps=1)


def test_follow_writes_after_the_prefix_and_cuts_it():
    poet = extend_vocabulary(tiny_poet(), OPEN + CLOSE + FILLER)
    poem = follow(poet, "keyword", "月", seed=3)
    prompt = instruction("keyword", "月")
    assert poet.write(prompt, seed=3) == prompt + poem


def test_stages_of_the_shipped_poet():
    with pytest.raises(ValueError, match="stage must be one of"):
        pretrained_poet(stage="rlhf")
    tuned = pretrained_poet(stage="sft")
    assert len(tuned.vocab) == len(pretrained_poet().vocab) + 3


@pytest.mark.parametrize("arm", ["full", "unmasked", "lora", "full_first_verse", "full_anywhere"])
@pytest.mark.parametrize("seed", [1, 2])
def test_other_training_seeds_are_recorded_with_their_seed(arm, seed):
    record = load_record(sft_record_name(arm, seed))
    assert record["arm"] == arm and record["training"] == {**SFT_ARMS[arm], "seed": seed}
    assert record["pairs"] == load_record(sft_record_name(arm))["pairs"]  # the same pairs
    assert record["losses"] != load_record(sft_record_name(arm))["losses"]  # other batches
    assert sft_record_name(arm) == SFT_RECORD.format(arm=arm)


@pytest.mark.parametrize("arm", sorted(SFT_ARMS))
def test_the_records_hold_what_the_recipe_says(arm):
    record = load_record(SFT_RECORD.format(arm=arm))
    assert record["arm"] == arm and record["training"] == SFT_ARMS[arm]
    assert record["pairs"] == {**SFT_PAIRS, "shares": PAIR_SHARES}
    assert len(record["losses"]) == SFT_ARMS[arm]["steps"]
    assert record["keyword_train"]["poems"] == 100 and record["keyword_poems"]["poems"] == 200
