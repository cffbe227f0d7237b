"""gpt_to_hf (chapter 20): our GPT copied into transformers' GPT2LMHeadModel, the inverse of chapter 15's
gpt_from_hf. Random weights of a tiny configuration in float64 (nothing downloads): the same logits within
1e-12, the way back to our GPT exact, the mode kept, and what GPT-2 cannot express refused by name."""

import dataclasses

import pytest
import torch

from transformer_book import ACTIVATIONS, GPT, GPTConfig, gpt_from_hf, gpt_to_hf

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


def tiny_gpt(**changes):
    settings = dict(max_len=16, d_model=32, heads=4, layers=2) | changes
    torch.manual_seed(0)
    ours = GPT(GPTConfig(40, **settings)).double()
    with torch.no_grad():  # weights well away from GPT-2's initialisation: every one matters
        for parameter in ours.parameters():
            parameter.normal_(0.0, 0.3)
    return ours.eval()


@pytest.mark.parametrize(
    "changes",
    [{}, {"activation": "gelu", "tie_embeddings": False}, {"activation": "relu", "d_ff": 24, "eps": 1e-6}],
)
def test_the_same_logits_in_float64_and_the_way_back_is_exact(changes):
    ours = tiny_gpt(**changes)
    theirs = gpt_to_hf(ours, bos_token_id=1, eos_token_id=1, pad_token_id=0)
    assert type(theirs).__name__ == "GPT2LMHeadModel" and next(theirs.parameters()).dtype == torch.float64
    assert (theirs.config.pad_token_id, theirs.config.eos_token_id) == (0, 1) and not theirs.training
    tokens = torch.randint(0, 40, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        our_logits, their_logits = ours(tokens), theirs(tokens).logits
    assert our_logits.abs().max() > 1.0  # logits of a size where a wrong weight shows
    assert (our_logits - their_logits).abs().max() < 1e-12
    back = gpt_from_hf(theirs)
    c = ours.config
    assert back.config == dataclasses.replace(c, d_ff=c.d_ff or 4 * c.d_model)  # None: 4 * d_model, spelt out
    mine, returned = ours.state_dict(), back.state_dict()
    assert mine.keys() == returned.keys() and all(torch.equal(mine[k], returned[k]) for k in mine)


def test_the_copy_is_independent_and_keeps_the_mode():
    ours = tiny_gpt().train()
    theirs = gpt_to_hf(ours)
    assert theirs.training
    with torch.no_grad():
        theirs.transformer.h[0].attn.c_attn.weight.zero_()
    assert ours.layers[0].self_attn.query_proj.weight.abs().max() > 0  # ours untouched


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"norm_first": False}, "GPTConfig.norm_first=False has no GPT-2 counterpart"),
        ({"learned_positions": False}, "GPTConfig.learned_positions=False has no GPT-2 counterpart"),
        ({"activation": "silu"}, "GPTConfig.activation='silu' has no GPT-2 counterpart; expected one of"),
    ],
)
def test_what_gpt2_cannot_express_is_refused(changes, message, monkeypatch):
    monkeypatch.setitem(ACTIVATIONS, "silu", torch.nn.functional.silu)  # ours could; GPT-2's could not
    with pytest.raises(ValueError, match=message):
        gpt_to_hf(tiny_gpt(**changes))


def test_only_our_gpt_is_converted():
    with pytest.raises(TypeError, match="expected our GPT; got Linear"):
        gpt_to_hf(torch.nn.Linear(2, 2))
