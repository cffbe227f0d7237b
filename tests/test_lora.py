"""LoRA (chapter 19) against the library people use: peft's LoRA layer in float64.

The same nn.Linear wrapped by our LoRALinear and by peft (get_peft_model on a one-layer module, nothing
downloaded): the same output, the same gradient of every parameter and of the input, the same merged
weight, within 1e-12; the initialisation drawn from the same distribution (Kaiming-uniform on the
(rank, in) shape: bound 1/sqrt(in)); merging changes nothing a model computes; bad arguments are
refused by name.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from transformer_book import (
    GPT,
    LORA_TARGETS,
    GPTConfig,
    LoRALinear,
    add_lora,
    merge_lora,
    trainable_parameters,
)

peft = pytest.importorskip("peft")

IN, OUT, RANK, ALPHA = 48, 40, 6, 12.0


class OneLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(IN, OUT)

    def forward(self, x):
        return self.proj(x)


def pair(seed=0):
    """(ours, theirs, their LoRA layer): one float64 layer wrapped both ways, B made non-zero."""
    torch.manual_seed(seed)
    base = OneLayer().double()
    theirs = peft.get_peft_model(
        OneLayer().double(), peft.LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=["proj"], lora_dropout=0.0)
    )
    layer = theirs.base_model.model.proj
    layer.base_layer.load_state_dict(base.proj.state_dict())
    ours = LoRALinear(base.proj, RANK, ALPHA)
    with torch.no_grad():
        layer.lora_A["default"].weight.normal_()
        layer.lora_B["default"].weight.normal_()  # zero B would leave A's gradient zero: nothing to compare
        ours.lora_A.copy_(layer.lora_A["default"].weight)
        ours.lora_B.copy_(layer.lora_B["default"].weight)
    return ours, theirs, layer


def test_same_shapes_and_scale_as_peft():
    ours, _, layer = pair()
    assert ours.lora_A.shape == layer.lora_A["default"].weight.shape == (RANK, IN)
    assert ours.lora_B.shape == layer.lora_B["default"].weight.shape == (OUT, RANK)
    assert ours.scale == layer.scaling["default"] == ALPHA / RANK


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_output_every_gradient_and_merged_weight_match_peft_in_float64(seed):
    ours, theirs, layer = pair(seed)
    x = torch.randn(3, 5, IN, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_ours, y_theirs = ours(x_ours), theirs(x_theirs)
    assert (y_ours - y_theirs).abs().max() <= 1e-12
    weights = torch.randn_like(y_ours)  # a loss whose gradient differs at every output
    (y_ours * weights).sum().backward()
    (y_theirs * weights).sum().backward()
    gaps = {
        "A": ours.lora_A.grad - layer.lora_A["default"].weight.grad,
        "B": ours.lora_B.grad - layer.lora_B["default"].weight.grad,
        "x": x_ours.grad - x_theirs.grad,
    }
    assert {name: float(gap.abs().max()) <= 1e-12 for name, gap in gaps.items()} == dict.fromkeys(gaps, True)
    # the frozen base: no gradient in either
    assert ours.base.weight.grad is None and layer.base_layer.weight.grad is None
    merged_theirs = theirs.merge_and_unload().proj.weight
    assert (ours.merged_weight() - merged_theirs).abs().max() <= 1e-12


def test_initialisation_is_peft_s_distribution():
    # A: Kaiming-uniform with a = sqrt(5) on (rank, in): uniform on +-1/sqrt(in), variance bound^2 / 3
    torch.manual_seed(0)
    big_in, rank = 4096, 64
    ours = LoRALinear(nn.Linear(big_in, 32), rank, 16)
    theirs = peft.get_peft_model(
        nn.Sequential(nn.Linear(big_in, 32)), peft.LoraConfig(r=rank, lora_alpha=16, target_modules=["0"])
    )
    their_a = theirs.base_model.model[0].lora_A["default"].weight.detach()
    bound = 1 / math.sqrt(big_in)
    for a in (ours.lora_A.detach(), their_a):
        assert a.abs().max() <= bound
        assert a.abs().max() > 0.999 * bound  # 262,144 draws reach the bound
        assert abs(a.var().item() / (bound**2 / 3) - 1) < 0.02
        assert abs(a.mean().item()) < 0.01 * bound
    assert torch.equal(ours.lora_B, torch.zeros(32, rank))
    assert torch.equal(theirs.base_model.model[0].lora_B["default"].weight, torch.zeros(32, rank))


def test_a_fresh_adapter_changes_nothing_and_merging_changes_nothing():
    torch.manual_seed(0)
    model = GPT(GPTConfig(30, max_len=12, d_model=16, heads=2, layers=2)).double().eval()
    tokens = torch.randint(0, 30, (2, 12))
    before = model(tokens)
    add_lora(model, rank=4, alpha=8)
    assert torch.equal(model(tokens), before)  # B = 0
    wrapped = [m for m in model.modules() if isinstance(m, LoRALinear)]
    assert len(wrapped) == 2 * len(LORA_TARGETS)
    # trained: only A and B, rank * (in + out) each
    assert trainable_parameters(model) == sum(4 * (m.base.in_features + m.base.out_features) for m in wrapped)
    with torch.no_grad():
        for m in wrapped:
            m.lora_B.normal_(std=0.1)
    adapted = model(tokens)
    assert (adapted - before).abs().max() > 1e-3
    merge_lora(model)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    assert (model(tokens) - adapted).abs().max() <= 1e-12


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(TypeError, match="nn.Linear"):
        LoRALinear(nn.Conv1d(2, 2, 1), 2, 4)
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(nn.Linear(8, 8), 0, 4)
    with pytest.raises(ValueError, match="alpha"):
        LoRALinear(nn.Linear(8, 8), 2, -1)
    with pytest.raises(ValueError, match="no nn.Linear"):
        add_lora(nn.Sequential(nn.Linear(2, 2)), 1, 1)
