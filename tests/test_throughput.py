"""tools/throughput.py: the training tools' tokens/s, FLOP/s and MFU. The meter counts each training
step's FLOPs from the batch's own shape with the package's counts, its tokens without the padding,
and neither evaluation (no gradients, eval mode) nor another model; the figures are consistent with
each other; watching changes no bit of the training. (No wall-clock bound: only that the times and peaks are positive.)"""

import contextlib
import re

import pytest
import torch

import throughput
from throughput import StepMeter, encoder_decoder_step_cost, gpt_step_cost
from transformer_book import (
    GPT,
    GPTConfig,
    LabelSmoothingLoss,
    Transformer,
    causal_lm_loss,
    encoder_decoder_flops,
    flops_per_token,
    make_model,
    sequence_loss,
    training_steps,
)


@pytest.fixture(autouse=True)
def small_peak(monkeypatch):
    monkeypatch.setattr(throughput, "PEAK_SIZE", 64)  # a peak in milliseconds: the tests check no speed


def check_consistent(found):
    assert found.seconds > 0 and min(found.peaks) > 0 and found.peak == max(found.peaks)
    assert found.tokens_per_second == found.tokens / found.seconds
    assert found.flop_rate == found.flops / found.seconds
    assert found.mfu == pytest.approx(found.flop_rate / found.peak, rel=1e-12) and found.mfu > 0
    line = found.line("steps")
    assert line.startswith("steps: ") and "tokens/s (padding not counted)" in line
    assert f"{found.steps:,} steps, {found.tokens:,} tokens" in line
    rate, gflops, utilisation = re.search(r"([\d,]+) tokens/s .*?([\d.e+]+) GFLOP/s, MFU ([\d.e+-]+)%", line).groups()
    assert float(rate.replace(",", "")) == round(found.tokens_per_second)
    assert float(gflops) == pytest.approx(found.flop_rate / 1e9, rel=5e-3)
    assert float(utilisation) == pytest.approx(100 * found.mfu, rel=5e-2)


def test_a_gpts_steps_are_counted_from_each_batch_and_padding_is_not_a_token():
    torch.manual_seed(0)
    config = GPTConfig(20, max_len=16, d_model=16, heads=2, layers=1)
    model, bystander = GPT(config), GPT(config)
    batches = [
        torch.tensor([[1, 5, 6, 1], [1, 7, 1, 0]]),  # one pad
        torch.tensor([[1, 5, 6, 7, 8, 1]] * 3),
    ]
    optimizer = torch.optim.AdamW(model.parameters())
    with StepMeter(GPT, gpt_step_cost(pad_id=0)) as meter:
        for batch, _, _ in training_steps(model, batches, lambda m, b: causal_lm_loss(m(b), b, 0), optimizer):
            with torch.no_grad():
                model(batch)  # evaluation between steps: not metered
            model.eval()
            bystander.eval()(batch)
    model.train()(batches[0]).sum().backward()  # after the block: not metered
    optimizer.step()
    found = meter.result()
    assert (found.steps, found.tokens) == (2, 7 + 18)
    assert found.flops == 8 * flops_per_token(config, 4) + 18 * flops_per_token(config, 6)
    assert found.threads == torch.get_num_threads() and found.device == "cpu"
    check_consistent(found)


def test_an_encoder_decoders_steps_count_source_and_decoder_input_and_train_the_same_bits():
    config = dict(num_layers=1, d_model=16, d_ff=32, heads=2, dropout=0.1)
    source = torch.tensor([[3, 4, 5, 0, 0], [3, 4, 5, 6, 7]])  # 8 real tokens
    target = torch.tensor([[1, 4, 5, 2, 0, 0], [1, 4, 2, 0, 0, 0]])  # the decoder reads [:, :-1]: 7 real
    loss_fn = LabelSmoothingLoss(13, 0, 0.1)

    def loss_of(model, batch):
        return sequence_loss(model, *batch, 0, loss_fn)

    def trained(meter=None):  # two seeded steps, dropout drawn, with or without the meter watching
        torch.manual_seed(0)
        model = make_model(11, 13, **config)
        optimizer = torch.optim.Adam(model.parameters())
        with meter or contextlib.nullcontext():
            for _ in training_steps(model, [(source, target)] * 2, loss_of, optimizer):
                pass
        return model.state_dict()

    meter = StepMeter(Transformer, encoder_decoder_step_cost(config, pad_id=0))
    watched, unwatched = trained(meter), trained()
    assert all(torch.equal(watched[name], unwatched[name]) for name in unwatched)  # the hooks only read
    found = meter.result()
    assert (found.steps, found.tokens) == (2, 2 * (8 + 7))
    assert found.flops == 2 * 2 * sum(encoder_decoder_flops(config, 13, 5, 5).values())
    check_consistent(found)


def test_a_meter_without_steps_says_so():
    with StepMeter(GPT, gpt_step_cost(pad_id=0)) as meter:
        pass
    with pytest.raises(RuntimeError, match="no metered steps"):
        meter.result()
