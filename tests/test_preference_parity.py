"""DPO and GRPO (chapter 20) against the library people use: trl's DPOTrainer and GRPOTrainer computations, on the
shipped poet itself.

Nothing downloads: the shipped poet (chapter 15's GPT, 4 layers, 5,501 tokens), in float64, copied into a
GPT2LMHeadModel by chapter 20's gpt_to_hf, and a word-level tokenizer built in memory whose word "t<i>" is the
poet's token i (GRPOTrainer loads the model from a folder it was saved to, as it loads its reference). Ours is the
poet's own GPT, scoring the same token ids, the poet's own poems, with the package's functions. The reference is
the poet with its weights moved by seeded noise, so that the rewards and the KL term are not 0.

* DPO: trl's own loss (DPOTrainer.compute_loss on a batch of its DataCollatorForPreference), its logged
  rewards, every parameter's gradient, and every parameter after one step of the AdamW the trainer builds,
  against ours; the pairs are the poet's poems judged by the rhyme reward (preference_pairs). The
  length-normalised variant against trl's "sigmoid_norm". Adam's first step divides each gradient by its own
  size, so a gradient near 0 that float32 rounded would move its parameter by up to the learning rate; the
  trainer is given eps 1e-3, with which the step is continuous in the gradient.
* GRPO: the advantages of _generate_and_score_completions on fixed completions (two groups of the poet's own
  poems, drawn with the cache by sample_group, handed to it through trl's rollout_func hook) and fixed
  rewards, then _compute_loss on them after the policy has moved (a second iteration on the same samples, so
  that ratios are clipped), against grpo_advantages and grpo_loss; the clipped share against trl's
  clip_ratio/region_mean.

trl 1.16 scores tokens through its fused LM head, which projects and normalises in float32 even for a float64
model: each of its per-token log-probabilities carries float32 rounding, and on the poet (5,501 logits a token,
poems of about 49 tokens) the sums of a poem's log-probabilities differ from ours by up to 1.7e-5. Measured over
twelve batches (two sets of three pairs, reference noise seeds 100-105, and the pairs of seeds 0-5): the loss
within 8.5e-7, the mean rewards (beta = 0.1 times such sums) within 1.6e-6, the gradients within 5.8e-7, the
parameters after the step within 1.3e-7. Asserted: loss, rewards and gradients within 5e-6, summed
log-probabilities within 1e-4, parameters within 1e-6; GRPO's advantages and loss, averaged over tokens, within
1e-6 (measured: 1e-7 and 3e-8). (On a tiny random GPT-2 of 40 tokens, the bounds held at 1e-6 throughout: the
rounding grows with the logits the poet has learnt.)
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch

from transformer_book import (
    dpo_loss,
    gpt_from_hf,
    gpt_to_hf,
    grpo_advantages,
    grpo_loss,
    hf_parameter_pairs,
    normalized_dpo_loss,
    preference_pairs,
    pretrained_poet,
    response_mask,
    sample_group,
    sequence_log_probs,
    token_log_probs,
)

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")
tokenizers = pytest.importorskip("tokenizers")
from trl.trainer.dpo_trainer import DataCollatorForPreference

transformers.logging.set_verbosity_error()
BETA, GROUP = 0.1, 4
POET = pretrained_poet()
VOCAB, PAD, START = len(POET.vocab), POET.vocab.pad_id, POET.vocab.boundary_id
assert (PAD, START, POET.vocab.unk_id) == (0, 1, 2)  # as the tokenizer below names them


@pytest.fixture(scope="module")
def tokenizer():
    """Token i is the word "t<i>": <pad> is t0, <s> (our poems' start and end) t1, <unk> t2."""
    word_level = tokenizers.Tokenizer(
        tokenizers.models.WordLevel(vocab={f"t{i}": i for i in range(VOCAB)}, unk_token="t2")
    )
    word_level.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=word_level, pad_token="t0", eos_token="t1", unk_token="t2"
    )


def the_poet(noise_seed=None, scale=0.01):
    """Our GPT with the shipped poet's weights in float64, moved by seeded noise if ``noise_seed``."""
    ours = copy.deepcopy(POET.model).double()
    if noise_seed is not None:
        draw = torch.Generator().manual_seed(noise_seed)
        with torch.no_grad():
            for parameter in ours.parameters():
                parameter.add_(scale * torch.randn(parameter.shape, generator=draw, dtype=torch.float64))
    return ours


def library(ours):
    """The same weights in transformers' GPT2LMHeadModel, its mode ours."""
    return gpt_to_hf(ours, bos_token_id=START, eos_token_id=START, pad_token_id=PAD)


def padded(rows):
    width = max(map(len, rows))
    return torch.tensor([row + [PAD] * (width - len(row)) for row in rows])


def dpo_trainer(policy, reference, tokenizer, folder, **settings):
    args = trl.DPOConfig(
        output_dir=str(folder), beta=BETA, report_to="none", use_cpu=True, bf16=False, learning_rate=1e-3,
        weight_decay=0.0, adam_epsilon=1e-3, **settings,
    )  # fmt: skip
    data = datasets.Dataset.from_list([{"prompt": "t1", "chosen": " t5 t6", "rejected": " t7"}])
    return trl.DPOTrainer(model=policy, ref_model=reference, args=args, train_dataset=data, processing_class=tokenizer)


@functools.cache
def poem_pairs():
    """Six pairs of the poet's own poems, (rhymed, not), drawn once for the DPO tests."""
    return preference_pairs(POET, 6, seed=0)


def dpo_batch(pairs):
    """trl's collated batch of ``pairs`` answering the prompt <s>, and ours: (chosen, rejected) token ids."""
    chosen = [POET.vocab.encode(c)[1:] for c, _ in pairs]  # the poem and its closing <s>
    rejected = [POET.vocab.encode(r)[1:] for _, r in pairs]
    examples = [{"prompt_ids": [START], "chosen_ids": c, "rejected_ids": r} for c, r in zip(chosen, rejected)]
    theirs = DataCollatorForPreference(pad_token_id=PAD)(examples)
    return theirs, padded([[START, *c] for c in chosen]), padded([[START, *r] for r in rejected])


def test_dpo_loss_rewards_gradients_and_one_step_match_trl(tokenizer, tmp_path):
    ours, our_reference = the_poet().train(), the_poet(noise_seed=100).eval()  # rewards not 0
    policy, reference = library(ours), library(our_reference)
    trainer = dpo_trainer(policy, reference, tokenizer, tmp_path)
    their_batch, chosen, rejected = dpo_batch(poem_pairs()[:3])
    trainer.create_optimizer()
    trainer.model.train()
    their_loss = trainer.compute_loss(trainer.model, their_batch)
    their_loss.backward()
    logged = {key: values[-1] for key, values in trainer._metrics["train"].items()}

    logps = [sequence_log_probs(ours, tokens, START) for tokens in (chosen, rejected)]
    with torch.no_grad():
        reference_logps = [sequence_log_probs(our_reference, tokens, START) for tokens in (chosen, rejected)]
    loss, chosen_rewards, rejected_rewards = dpo_loss(*logps, *reference_logps, BETA)
    loss.backward()
    assert abs(loss.item() - their_loss.item()) < 5e-6
    assert abs(chosen_rewards.mean().item() - logged["rewards/chosen"]) < 5e-6
    assert abs(rejected_rewards.mean().item() - logged["rewards/rejected"]) < 5e-6
    assert abs(chosen_rewards.mean().item()) > 1e-3  # the rewards compared are not zero
    assert abs(logps[0].mean().item() - logged["logps/chosen"]) < 1e-4
    assert abs(logps[1].mean().item() - logged["logps/rejected"]) < 1e-4

    pairs = hf_parameter_pairs(ours, policy)
    for name, mine, their, convert in pairs:
        assert (mine.grad - convert(their.grad)).abs().max() < 5e-6, name
    groups = trainer.optimizer.param_groups
    assert type(trainer.optimizer) is torch.optim.AdamW and all(g["weight_decay"] == 0.0 for g in groups)
    settings = {key: groups[0][key] for key in ("lr", "betas", "eps")}
    optimizer = torch.optim.AdamW(ours.parameters(), weight_decay=0.0, **settings)
    optimizer.step()
    trainer.optimizer.step()
    moved = max((mine - convert(their)).abs().max().item() for _, mine, their, convert in pairs)
    assert moved < 1e-6


def test_length_normalised_dpo_matches_trls_sigmoid_norm(tokenizer, tmp_path):
    ours, our_reference = the_poet(), the_poet(noise_seed=102)
    policy, reference = library(ours), library(our_reference)
    trainer = dpo_trainer(policy, reference, tokenizer, tmp_path, loss_type=["sigmoid_norm"])
    their_batch, chosen, rejected = dpo_batch(poem_pairs()[3:])
    their_loss = trainer.compute_loss(trainer.model, their_batch)
    with torch.no_grad():
        logps = [sequence_log_probs(ours, tokens, START) for tokens in (chosen, rejected)]
        reference_logps = [sequence_log_probs(our_reference, tokens, START) for tokens in (chosen, rejected)]
        lengths = [response_mask(tokens, START).sum(dim=1) for tokens in (chosen, rejected)]
        loss, _, _ = normalized_dpo_loss(*logps, *reference_logps, *lengths, BETA)
        summed, _, _ = dpo_loss(*logps, *reference_logps, BETA)
    assert abs(loss.item() - their_loss.item()) < 5e-6
    assert abs(summed.item() - loss.item()) > 1e-4  # the two variants differ on this batch


def test_grpo_advantages_and_loss_match_trl(tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    library(the_poet()).save_pretrained(tmp_path / "poet")
    tokens, _ = sample_group(POET, 2 * GROUP, generator=torch.Generator().manual_seed(5))
    completions = [row[1 : row.index(START, 1) + 1] for row in tokens.tolist()]  # each poem and its <s>
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 2.0, 0.0, 1.0])  # two groups of 4

    def rollout(prompts, trainer):  # trl's hook for completions made elsewhere: these, fixed
        return {
            "prompt_ids": [[START] for _ in prompts],
            "completion_ids": completions,
            "logprobs": [[0.0] * len(c) for c in completions],
        }

    def reward(prompts, completions, completion_ids, **_):
        return rewards.tolist()

    args = trl.GRPOConfig(
        output_dir=str(tmp_path), report_to="none", use_cpu=True, bf16=False, num_generations=GROUP,
        per_device_train_batch_size=2 * GROUP, max_completion_length=POET.model.config.max_len - 1, beta=0.04, epsilon=0.2,
        loss_type="grpo", num_iterations=2, model_init_kwargs={"dtype": torch.float64},
    )  # fmt: skip
    data = datasets.Dataset.from_list([{"prompt": "t1"}] * (2 * GROUP))
    trainer = trl.GRPOTrainer(
        model=str(tmp_path / "poet"), reward_funcs=reward, args=args, train_dataset=data,
        processing_class=tokenizer, rollout_func=rollout,
    )  # fmt: skip
    policy = trainer.model
    with torch.no_grad():  # a reference that differs from the policy: a KL term that is not 0
        for parameter in trainer.ref_model.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(7)))
    old, reference = gpt_from_hf(policy), gpt_from_hf(trainer.ref_model)  # ours again, from theirs
    policy.train()
    batch = trainer._generate_and_score_completions([{"prompt": "t1"}] * (2 * GROUP))
    advantages = grpo_advantages(rewards.double(), GROUP)
    assert (advantages - batch["advantages"]).abs().max() < 1e-6

    with torch.no_grad():  # the policy moves, as after a first step on these samples
        for parameter in policy.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(8)))
    ours = gpt_from_hf(policy)
    trainer.current_gradient_accumulation_steps = 1  # set by trl's training loop, which is not run here
    their_loss = trainer._compute_loss(policy, batch)
    logged = {key: values[-1] for key, values in trainer._metrics["train"].items()}

    tokens = torch.cat([torch.full((2 * GROUP, 1), START), batch["completion_ids"]], dim=1)
    tokens = tokens.masked_fill(torch.cat([torch.ones(2 * GROUP, 1), batch["completion_mask"]], dim=1) == 0, START)
    mask = response_mask(tokens, START)
    assert torch.equal(mask.long(), batch["completion_mask"].long())
    with torch.no_grad():
        old_logps, reference_logps = token_log_probs(old, tokens), token_log_probs(reference, tokens)
    loss, statistics = grpo_loss(token_log_probs(ours, tokens), old_logps, reference_logps, advantages, mask)
    assert abs(loss.item() - their_loss.item()) < 1e-6
    assert statistics["clipped"] == pytest.approx(logged["clip_ratio/region_mean"], abs=1e-6)
    assert statistics["clipped"] > 0 and statistics["kl"] > 1e-3  # both terms are at work
