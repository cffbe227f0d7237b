"""DPO and GRPO (chapter 20) against the library people use: trl's DPOTrainer and GRPOTrainer computations.

Nothing downloads: a tiny GPT2LMHeadModel in float64, seeded, and a word-level tokenizer built in memory
(GRPOTrainer loads the model from a folder it was saved to, as it loads its reference). Our GPT holds the
same weights through chapter 15's gpt_from_hf and scores the same token ids with the package's functions.

* DPO: trl's own loss (DPOTrainer.compute_loss on a batch of its DataCollatorForPreference), its logged
  rewards, every parameter's gradient, and every parameter after one step of the AdamW the trainer builds,
  against ours; the length-normalised variant against trl's "sigmoid_norm". Adam's first step divides
  each gradient by its own size, so a gradient near 0 that float32 rounded moves its parameter by up to the
  learning rate (at Adam's eps 1e-8, seeds 0-5: gradients within 3.3e-8, parameters after the step 5.8e-6
  apart on seed 3); the trainer is given eps 1e-3, with which the step is continuous in the gradient (the
  parameters then agree within 1.6e-8 over seeds 0-5).
* GRPO: the advantages of _generate_and_score_completions on fixed completions (handed to it through
  trl's rollout_func hook) and fixed rewards, then _compute_loss on them after the policy has moved
  (a second iteration on the same samples, so that ratios are clipped), against grpo_advantages and
  grpo_loss; the clipped share against trl's clip_ratio/region_mean.

trl 1.16 scores tokens through its fused LM head, whose accumulators are float32 even for a float64 model:
its per-token log-probabilities carry float32 rounding (measured here: under 5e-7 a token). The loss, the
rewards, the advantages, the gradients and the updated parameters agree within 1e-6 (measured: under
2e-7); summed log-probabilities, sums of about ten rounded terms near -4, within 1e-5.
"""

from __future__ import annotations

import pytest
import torch

from transformer_book import (
    dpo_loss,
    gpt_from_hf,
    grpo_advantages,
    grpo_loss,
    hf_parameter_pairs,
    normalized_dpo_loss,
    response_mask,
    sequence_log_probs,
    token_log_probs,
)

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")
tokenizers = pytest.importorskip("tokenizers")
from trl.trainer.dpo_trainer import DataCollatorForPreference

transformers.logging.set_verbosity_error()
VOCAB, START, PAD, BETA, GROUP = 40, 1, 0, 0.1, 4


@pytest.fixture(scope="module")
def tokenizer():
    """Token i is the word "t<i>": <pad> is t0, <s> (our poems' start and end) t1."""
    word_level = tokenizers.Tokenizer(
        tokenizers.models.WordLevel(vocab={f"t{i}": i for i in range(VOCAB)}, unk_token="t2")
    )
    word_level.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=word_level, pad_token="t0", eos_token="t1", unk_token="t2"
    )


def tiny_gpt2(seed):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=32, n_embd=16, n_layer=2, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, bos_token_id=START, eos_token_id=START, pad_token_id=PAD,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(config).double()


def responses(count, seed):
    """``count`` token lists of 3 to 11 tokens, each closed by <s>."""
    draw = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 11, (count,), generator=draw).tolist()
    return [torch.randint(3, VOCAB, (n,), generator=draw).tolist() + [START] for n in lengths]


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


def dpo_batch(seed):
    """trl's collated batch of 3 pairs answering the prompt <s>, and ours: (chosen, rejected) token ids."""
    chosen, rejected = responses(3, seed), responses(3, seed + 50)
    examples = [{"prompt_ids": [START], "chosen_ids": c, "rejected_ids": r} for c, r in zip(chosen, rejected)]
    theirs = DataCollatorForPreference(pad_token_id=PAD)(examples)
    return theirs, padded([[START, *c] for c in chosen]), padded([[START, *r] for r in rejected])


@pytest.mark.parametrize("seed", [0, 3])
def test_dpo_loss_rewards_gradients_and_one_step_match_trl(seed, tokenizer, tmp_path):
    policy, reference = tiny_gpt2(seed), tiny_gpt2(seed + 100)  # a reference that differs: rewards not 0
    ours, our_reference = gpt_from_hf(policy).train(), gpt_from_hf(reference).eval()
    trainer = dpo_trainer(policy, reference, tokenizer, tmp_path)
    their_batch, chosen, rejected = dpo_batch(seed)
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
    assert abs(loss.item() - their_loss.item()) < 1e-6
    assert abs(chosen_rewards.mean().item() - logged["rewards/chosen"]) < 1e-6
    assert abs(rejected_rewards.mean().item() - logged["rewards/rejected"]) < 1e-6
    assert abs(chosen_rewards.mean().item()) > 1e-3  # the rewards compared are not zero
    assert abs(logps[0].mean().item() - logged["logps/chosen"]) < 1e-5
    assert abs(logps[1].mean().item() - logged["logps/rejected"]) < 1e-5

    pairs = hf_parameter_pairs(ours, policy)
    for name, mine, their, convert in pairs:
        assert (mine.grad - convert(their.grad)).abs().max() < 1e-6, name
    groups = trainer.optimizer.param_groups
    assert type(trainer.optimizer) is torch.optim.AdamW and all(g["weight_decay"] == 0.0 for g in groups)
    settings = {key: groups[0][key] for key in ("lr", "betas", "eps")}
    optimizer = torch.optim.AdamW(ours.parameters(), weight_decay=0.0, **settings)
    optimizer.step()
    trainer.optimizer.step()
    moved = max((mine - convert(their)).abs().max().item() for _, mine, their, convert in pairs)
    assert moved < 1e-6


def test_length_normalised_dpo_matches_trls_sigmoid_norm(tokenizer, tmp_path):
    policy, reference = tiny_gpt2(2), tiny_gpt2(102)
    ours, our_reference = gpt_from_hf(policy), gpt_from_hf(reference)
    trainer = dpo_trainer(policy, reference, tokenizer, tmp_path, loss_type=["sigmoid_norm"])
    their_batch, chosen, rejected = dpo_batch(2)
    their_loss = trainer.compute_loss(trainer.model, their_batch)
    with torch.no_grad():
        logps = [sequence_log_probs(ours, tokens, START) for tokens in (chosen, rejected)]
        reference_logps = [sequence_log_probs(our_reference, tokens, START) for tokens in (chosen, rejected)]
        lengths = [response_mask(tokens, START).sum(dim=1) for tokens in (chosen, rejected)]
        loss, _, _ = normalized_dpo_loss(*logps, *reference_logps, *lengths, BETA)
        summed, _, _ = dpo_loss(*logps, *reference_logps, BETA)
    assert abs(loss.item() - their_loss.item()) < 1e-6
    assert abs(summed.item() - loss.item()) > 1e-4  # the two variants differ on this batch


def test_grpo_advantages_and_loss_match_trl(tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny_gpt2(3).save_pretrained(tmp_path / "tiny")
    completions = responses(2 * GROUP, seed=5)
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
        per_device_train_batch_size=2 * GROUP, max_completion_length=12, beta=0.04, epsilon=0.2,
        loss_type="grpo", num_iterations=2, model_init_kwargs={"dtype": torch.float64},
    )  # fmt: skip
    data = datasets.Dataset.from_list([{"prompt": "t1"}] * (2 * GROUP))
    trainer = trl.GRPOTrainer(
        model=str(tmp_path / "tiny"), reward_funcs=reward, args=args, train_dataset=data,
        processing_class=tokenizer, rollout_func=rollout,
    )  # fmt: skip
    policy = trainer.model
    with torch.no_grad():  # a reference that differs from the policy: a KL term that is not 0
        for parameter in trainer.ref_model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(7)))
    old, reference = gpt_from_hf(policy), gpt_from_hf(trainer.ref_model)
    policy.train()
    batch = trainer._generate_and_score_completions([{"prompt": "t1"}] * (2 * GROUP))
    advantages = grpo_advantages(rewards.double(), GROUP)
    assert (advantages - batch["advantages"]).abs().max() < 1e-6

    with torch.no_grad():  # the policy moves, as after a first step on these samples
        for parameter in policy.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(8)))
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
