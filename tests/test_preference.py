"""Chapter 20's preference module on its own: the summed log-probability, DPO's loss, GRPO's advantages
(and their guard against groups with one reward), GRPO's clipped loss with the k3 KL term, group sampling
through chapter 10's loop, and a toy round of each training loop. Parity with trl is
tests/test_preference_parity.py."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_book import (
    GPT,
    GPTConfig,
    PoemVocabulary,
    Poet,
    dpo_loss,
    flat_groups,
    grpo_advantages,
    grpo_loss,
    next_log_probs,
    normalized_dpo_loss,
    picked,
    poem_losses,
    preference_pairs,
    repeat_unlikelihood,
    response_mask,
    rhyme_characters,
    rhyme_positions,
    rhyme_reward,
    sample_group,
    sequence_log_probs,
    token_advantages,
    token_log_probs,
    train_dpo,
    train_grpo,
)

POEMS = ["白日依山尽，黄河入海流。欲穷千里目，更上一层楼。", "床前明月光，疑是地上霜。举头望明月，低头思故乡。"]


def toy_poet(seed=0) -> Poet:
    vocab = PoemVocabulary.from_poems(POEMS)
    torch.manual_seed(seed)
    return Poet(GPT(GPTConfig(len(vocab), max_len=32, d_model=16, heads=2, layers=1)).eval(), vocab)


def test_sequence_log_prob_is_minus_the_summed_loss_of_chapter_15():
    poet = toy_poet()
    tokens = poet.vocab.batch(POEMS[:1] + ["白日依山尽，"])  # the second is padded
    sums, counts = poem_losses(poet.model, poet.vocab, POEMS[:1] + ["白日依山尽，"])
    summed = sequence_log_probs(poet.model, tokens, poet.vocab.boundary_id)
    assert torch.allclose(summed.double(), -sums, atol=1e-4)
    assert response_mask(tokens, poet.vocab.boundary_id).sum(dim=1).tolist() == counts.tolist()


def test_the_mask_stops_after_the_first_end_and_gradients_flow():
    tokens = torch.tensor([[1, 5, 6, 1, 1, 1], [1, 7, 1, 0, 0, 0]])
    assert response_mask(tokens, 1).long().tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]]
    poet = toy_poet()
    token_log_probs(poet.model, poet.vocab.batch(POEMS)).sum().backward()
    assert all(p.grad is not None for p in poet.model.parameters())


def test_dpo_loss_is_log_2_at_the_start_and_its_rewards_are_beta_log_ratios():
    zero = torch.zeros(3)
    loss, chosen, rejected = dpo_loss(zero, zero, zero, zero, beta=0.1)
    assert loss.item() == pytest.approx(math.log(2)) and chosen.abs().sum() == 0
    policy_chosen = torch.tensor([-10.0, -20.0, -30.0], requires_grad=True)
    loss, chosen, rejected = dpo_loss(policy_chosen, zero - 25, zero - 21, zero - 24, beta=0.5)
    margins = 0.5 * ((policy_chosen - (zero - 21)) - (zero - 25 - (zero - 24)))
    assert loss.item() == pytest.approx(-torch.nn.functional.logsigmoid(margins).mean().item())
    assert chosen.tolist() == pytest.approx([5.5, 0.5, -4.5]) and not chosen.requires_grad
    assert rejected.tolist() == pytest.approx([-0.5] * 3)
    loss.backward()
    assert (policy_chosen.grad < 0).all()  # minimising raises the chosen poems' log-probability


def test_the_normalised_variant_divides_each_log_ratio_by_the_length():
    pc, pr, rc, rr = (torch.tensor([v]) for v in (-40.0, -50.0, -44.0, -48.0))
    loss, _, _ = normalized_dpo_loss(pc, pr, rc, rr, torch.tensor([40.0]), torch.tensor([20.0]), beta=2.0)
    expected = -torch.nn.functional.logsigmoid(torch.tensor(2.0 * (4 / 40 - (-2) / 20)))
    assert loss.item() == pytest.approx(expected.item())


def test_dpo_refuses_mismatched_shapes_and_a_bad_beta():
    with pytest.raises(ValueError, match=r"shape \(pairs,\)"):
        dpo_loss(torch.zeros(3), torch.zeros(2), torch.zeros(3), torch.zeros(3), 0.1)
    with pytest.raises(ValueError, match="beta"):
        dpo_loss(*[torch.zeros(3)] * 4, beta=0)


def test_grpo_advantages_normalise_within_each_group_with_bessels_correction():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 3.0, 1.0, 2.0, 2.0])
    advantages = grpo_advantages(rewards, 4)
    first = rewards[:4]
    assert advantages[:4].tolist() == pytest.approx(((first - first.mean()) / (first.std() + 1e-4)).tolist())
    assert advantages.view(2, 4).sum(dim=1).abs().max() < 1e-6


def test_a_flat_group_is_refused_by_name_or_counted():
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"groups \[1\] \(of 2\) have zero reward variance"):
        grpo_advantages(rewards, 4)
    assert flat_groups(rewards, 4).tolist() == [False, True]
    assert grpo_advantages(rewards, 4, allow_flat=True)[4:].abs().sum() == 0
    with pytest.raises(ValueError, match="group_size=3"):
        flat_groups(rewards, 3)
    with pytest.raises(ValueError, match="at least 2"):
        grpo_advantages(rewards, 1)


def test_grpo_loss_clips_the_ratio_and_its_kl_is_k3():
    new = torch.log(torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    old = torch.log(torch.tensor([[0.25, 0.5], [0.25, 0.5]]))  # ratio 2 on the first token
    ref = old.clone()
    mask = torch.tensor([[1, 1], [1, 0]])
    advantages = torch.tensor([1.0, -1.0])
    loss, stats = grpo_loss(new, old, ref, advantages, mask, epsilon=0.2, beta=0.0)
    # row 0: -min(2, 1.2) = -1.2 and -1; row 1: -min(-2, -1.2) = 2 (not clipped: a negative advantage)
    assert loss.item() == pytest.approx(((-1.2 - 1.0) / 2 + 2.0) / 2)
    assert stats["clipped"] == pytest.approx(1 / 3)
    _, stats = grpo_loss(new, new, ref, advantages, mask, beta=0.04)
    gap = ref - new
    k3 = (gap.exp() - gap - 1) * mask
    assert stats["kl"] == pytest.approx((k3.sum() / 3).item()) and stats["kl"] > 0


def test_a_group_is_drawn_by_the_one_decoding_loop_and_is_seeded():
    poet = toy_poet()
    tokens, poems = sample_group(poet, 4, generator=torch.Generator().manual_seed(3))
    again, same = sample_group(poet, 4, generator=torch.Generator().manual_seed(3))
    assert torch.equal(tokens, again) and poems == same and len(poems) == 4
    assert (tokens[:, 0] == poet.vocab.boundary_id).all() and tokens.size(1) <= poet.model.config.max_len
    assert all(poem and "<" not in poem for poem in poems)


def test_the_reward_is_rhyme_gated_by_form():
    assert rhyme_reward(POEMS[1]) == 1.0  # 霜 and 乡 rhyme
    assert rhyme_reward("床前明月光，疑是地上霜。举头望明月，") == 0.0  # not regular


def test_toy_rounds_of_both_loops_train_and_record():
    poet = toy_poet()
    before = [p.detach().clone() for p in poet.model.parameters()]
    history = train_grpo(poet, 2, groups=2, group_size=4, reward=lambda poem: float("月" in poem), seed=1)
    assert [r["step"] for r in history] == [1, 2] and history[0]["kl"] == 0.0
    assert any(not torch.equal(a, b) for a, b in zip(before, poet.model.parameters()))
    pairs = preference_pairs(toy_poet(), 2, reward=lambda poem: float("月" in poem))
    assert all("月" in chosen and "月" not in rejected for chosen, rejected in pairs)
    history = train_dpo(toy_poet(), pairs, 2, batch_size=2)
    assert history[0]["loss"] == pytest.approx(math.log(2), abs=1e-6)


def test_a_reward_that_never_varies_stops_the_loop_loudly():
    with pytest.raises(RuntimeError, match="no signal"):
        train_grpo(toy_poet(), 1, groups=1, group_size=2, reward=lambda poem: 1.0)


def test_grpo_loss_refuses_mismatched_shapes_and_a_bad_epsilon():
    values, mask = torch.zeros(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match=r"each be \(batch, T\); got \[\(2, 3\), \(2, 3\), \(2, 2\), \(2, 3\)\]"):
        grpo_loss(values, values, torch.zeros(2, 2), torch.zeros(2), mask)
    with pytest.raises(
        ValueError, match=r"advantages must be \(batch,\) = \(2,\) or \(batch, T\) = \(2, 3\); got \(3,\)"
    ):
        grpo_loss(values, values, values, torch.zeros(3), mask)
    with pytest.raises(ValueError, match="epsilon must be in"):
        grpo_loss(values, values, values, torch.zeros(2), mask, epsilon=1.5)


def test_token_log_probs_pick_the_tokens_that_came_from_the_whole_distribution():
    poet = toy_poet()
    tokens = torch.tensor([poet.vocab.encode(POEMS[0])])
    every = next_log_probs(poet.model, tokens)
    assert every.shape == (1, tokens.size(1) - 1, len(poet.vocab))
    assert torch.allclose(every.exp().sum(-1), torch.ones(1, tokens.size(1) - 1))
    assert torch.equal(picked(every, tokens), token_log_probs(poet.model, tokens))


def test_rhyme_positions_are_where_the_rhyme_characters_stand():
    cut, odd = "床前明月光，疑是地上霜。举头望明", "春眠不觉晓，处处闻啼鸟？夜来风雨声，花落知多少。"
    unmarked = "床前明月光，疑是地上霜"  # the last verse without its mark
    expected = {  # poem: (positions, characters), counted by hand
        POEMS[0]: ([10, 22], ["流", "楼"]),
        POEMS[1]: ([10, 22], ["霜", "乡"]),
        cut: ([10], ["霜"]),  # the cut-off fourth verse is not read
        odd: ([10, 22], ["鸟", "少"]),  # a question mark closes a verse too
        unmarked: ([10], ["霜"]),
        "一句。": ([], []),
        "": ([], []),
    }
    for poem, (positions, characters) in expected.items():
        assert (rhyme_positions(poem), rhyme_characters(poem)) == (positions, characters), poem


def unlikelihood_case():
    """A poem of four even verses over a vocabulary of 6 tokens (a character a token), with
    log-probabilities chosen so that the term can be written out by hand."""
    poem = "甲甲甲甲甲，甲甲甲甲乙。甲甲甲甲甲，甲甲甲甲乙。甲甲甲甲甲，甲甲甲甲丙。甲甲甲甲甲，甲甲甲甲乙。"
    ids = {"甲": 1, "乙": 2, "丙": 3, "，": 4, "。": 5}
    tokens = torch.tensor([[0] + [ids[c] for c in poem]])
    probs = torch.full((1, len(poem), 6), 1 / 6, dtype=torch.float64)
    return poem, tokens, probs


def test_the_unlikelihood_term_is_minus_log_of_not_repeating_at_each_later_rhyme():
    poem, tokens, probs = unlikelihood_case()
    ends = rhyme_positions(poem)  # 乙, 乙, 丙, 乙
    probs[0, ends[1], 2] = 0.5  # the second even verse: 乙 used before
    probs[0, ends[2], [2, 3]] = torch.tensor([0.25, 0.5], dtype=torch.float64)  # 乙 used; 丙 not yet
    probs[0, ends[3], [2, 3]] = torch.tensor([0.2, 0.3], dtype=torch.float64)  # 乙 and 丙 (乙 counted once)
    log_probs = probs.log().requires_grad_()
    term = repeat_unlikelihood(log_probs, tokens, [poem])
    expected = -(math.log(1 - 0.5) + math.log(1 - 0.25) + math.log(1 - 0.5))
    assert term.item() == pytest.approx(expected, rel=1e-12)
    term.backward()
    touched = {tuple(index) for index in log_probs.grad.nonzero().tolist()}
    assert touched == {(0, ends[1], 2), (0, ends[2], 2), (0, ends[3], 2), (0, ends[3], 3)}
    # averaged over the poems; a poem with one even verse (or none) adds nothing but counts
    cut = "甲甲甲甲甲，甲甲甲甲乙。"
    two = repeat_unlikelihood(log_probs.detach().repeat(2, 1, 1), tokens.repeat(2, 1), [poem, cut])
    assert two.item() == pytest.approx(expected / 2, rel=1e-12)
    assert repeat_unlikelihood(log_probs.detach(), tokens, [cut]).item() == 0.0


def test_grpo_with_the_unlikelihood_term_keeps_every_group_and_records_the_term():
    history = train_grpo(toy_poet(), 2, groups=2, group_size=4, reward=lambda poem: float("月" in poem),
                         unlikelihood=0.5, seed=1)  # fmt: skip
    assert all("unlikelihood" in record and record["unlikelihood"] >= 0 for record in history)
    plain = train_grpo(toy_poet(), 1, groups=2, group_size=4, reward=lambda poem: float("月" in poem), seed=1)
    assert "unlikelihood" not in plain[0]
    for bad in (-0.1, "0.3", float("nan")):
        with pytest.raises(ValueError, match=f"unlikelihood must be a positive number; got unlikelihood={bad!r}"):
            train_grpo(toy_poet(), 1, groups=1, group_size=2, unlikelihood=bad)


def test_token_advantages_cost_each_repeat_at_its_own_character():
    plain = "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。"
    thrice = "春山临水远，独坐望青天。白鸟飞林外，孤云落海天。江流千里去，野树万家田。明月东南起，清风满地天。"
    earlier = "门前流水急，花落满柴门。欲问春何在，山深不见村。"  # 门 opens the poem: not a repeat
    shaped = token_advantages(torch.tensor([1.0, -0.5, 0.25]), [plain, thrice, earlier], 50, 2.0)
    expected = torch.tensor([1.0, -0.5, 0.25]).unsqueeze(1).repeat(1, 50)
    expected[1, [22, 46]] -= 2.0  # verses 4 and 8 close on 天, as verse 2 did; verse 2 itself is no fault
    assert torch.equal(shaped, expected)


def test_grpo_loss_reads_one_advantage_a_token_as_one_a_response_when_they_agree():
    torch.manual_seed(0)
    new, old, ref = (torch.randn(3, 5, dtype=torch.float64) for _ in range(3))
    mask, advantages = torch.ones(3, 5), torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    one, _ = grpo_loss(new, old, ref, advantages, mask, beta=0.1)
    each, _ = grpo_loss(new, old, ref, advantages.unsqueeze(1).expand(3, 5), mask, beta=0.1)
    assert torch.equal(one, each)


def test_grpo_with_a_repeat_cost_trains_and_refuses_a_bad_cost():
    history = train_grpo(toy_poet(), 2, groups=2, group_size=4, reward=lambda poem: float("月" in poem),
                         repeat_cost=1.0, seed=1)  # fmt: skip
    assert [r["step"] for r in history] == [1, 2]
    for bad in (-1.0, "1", float("inf")):
        with pytest.raises(ValueError, match=f"repeat_cost must be a positive number; got repeat_cost={bad!r}"):
            train_grpo(toy_poet(), 1, groups=1, group_size=2, repeat_cost=bad)
