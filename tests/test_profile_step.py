"""tools/profile_step.py: on a toy poet (and the translator, small batches), the groups' shares add up
to the whole, the matrix products are found with their FLOPs, the report states the MFU and its
bound, and bad arguments are refused by name."""

import pytest

import profile_step
import transformer_book
from transformer_book import poems

POEMS = ["春眠不觉晓，处处闻啼鸟。", "床前明月光，疑是地上霜。举头望明月，低头思故乡。"] * 10
TOY = dict(max_len=64, d_model=32, heads=2, layers=1)


def test_a_toy_step_is_profiled(monkeypatch):
    def toy_split(name, by="poem"):
        return POEMS

    monkeypatch.setattr(transformer_book, "poem_split", toy_split)
    monkeypatch.setattr(poems, "poem_split", toy_split)
    result = profile_step.profile_step(steps=1, warmup=1, batch=4, config=TOY)
    assert set(result["shares"]) == {profile_step.LOGITS, *profile_step.GROUPS, profile_step.OTHER}
    assert sum(result["shares"].values()) == pytest.approx(1.0)
    assert 0 < result["product_share"] < 1 and result["product_flops"] > 0 and result["product_rate"] > 0
    assert result["step_seconds"] > 0 and len(result["peaks"]) == 2
    text = profile_step.report(result)
    assert "matrix products" in text and "MFU at most" in text


def test_the_translator_step_is_profiled():
    result = profile_step.profile_translator_step(steps=1, warmup=0, max_tokens=150)
    assert sum(result["shares"].values()) == pytest.approx(1.0)
    assert result["shares"][profile_step.LOGITS] > 0  # the target vocabulary's logits are found
    assert result["product_flops"] > 0 and result["model_flops"] > 0


def test_operators_are_grouped_by_name():
    assert profile_step.group_of("aten::addmm") == "matrix products"
    assert profile_step.group_of("aten::_log_softmax_backward_data") == "loss (log-softmax, NLL)"
    assert profile_step.group_of("aten::_foreach_mul_") == "AdamW's update"
    assert profile_step.group_of("aten::add") == profile_step.OTHER


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--steps", "0"], "--steps must be at least 1; got 0"),
        (["--warmup", "-1"], "--warmup must be 0 or more; got -1"),
    ],
)
def test_bad_arguments_are_refused(arguments, message, capsys):
    with pytest.raises(SystemExit):
        profile_step.main(arguments)
    assert message in capsys.readouterr().err
