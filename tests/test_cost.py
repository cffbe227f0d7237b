"""Chapter 18's cost module: the FLOPs counted from a configuration equal PyTorch's
FlopCounterMode on forward + backward, exactly (the counter multiplies shapes, and so does the
formula: an integer count, no rounding, so the issue's 1% bar is met with no error at all), for
the poet's GPT (tied and untied, the explicit and the fused attention), the modern decoder
(grouped-query attention, SwiGLU and GELU, every position scheme) and the translator, at several
lengths; the peak and MFU helpers' shapes and argument checks (no timing is asserted)."""

from dataclasses import replace

import pytest
import torch

from transformer_book import (
    GPT,
    TRANSLATION_CONFIG,
    GPTConfig,
    ModernConfig,
    ModernDecoder,
    causal_lm_loss,
    encoder_decoder_flops,
    flop_breakdown,
    flop_counter,
    flops_per_token,
    has_bf16_matmul,
    make_model,
    matmul_peak,
    mfu,
    padding_mask,
    target_mask,
)

LENGTHS = (1, 7, 32)
BATCH = 2


def counted(step) -> int:
    with flop_counter() as counter:
        step()
    return counter.get_total_flops()


def model_and_tokens(model_class, config, length):
    """The model, initialised from seed 0, and a batch of BATCH random sequences of ``length``."""
    torch.manual_seed(0)
    return model_class(config), torch.randint(1, config.vocab_size, (BATCH, length))


def lm_step(model, tokens, **options):
    return lambda: causal_lm_loss(model(tokens, **options), tokens).backward()


# Each configuration after the first names only what it changes.
POET_LIKE = GPTConfig(vocab_size=97, max_len=32, d_model=32, heads=4, layers=2)
GPTS = {
    "poet-like, tied": POET_LIKE,
    "untied, d_ff 48, post-norm": replace(
        POET_LIKE, heads=2, layers=1, d_ff=48, tie_embeddings=False, norm_first=False
    ),
}


@pytest.mark.parametrize("name", GPTS)
@pytest.mark.parametrize("length", LENGTHS)
def test_gpt_count_equals_the_counter(name, length):
    config = GPTS[name]
    model, tokens = model_and_tokens(GPT, config, length)
    positions = BATCH * length
    # chapter 2's explicit attention: two batched products, the counter's bmm
    explicit = counted(lm_step(model, tokens, need_weights=True))
    assert explicit == positions * flops_per_token(config, length)
    # the fused kernel: its backward computes the scores again
    fused = counted(lm_step(model, tokens))
    assert fused == positions * flops_per_token(config, length, recompute=True)


GQA = ModernConfig(vocab_size=97, d_model=32, heads=4, kv_heads=2, layers=2)
MODERNS = {
    "GQA 4/2, SwiGLU, rotary": GQA,
    "MQA, GELU, ALiBi, tied": replace(
        GQA, kv_heads=1, layers=1, feed_forward="gelu", positions="alibi", tie_embeddings=True
    ),
    "learned positions, d_ff 40": replace(
        GQA, d_model=48, kv_heads=None, layers=1, d_ff=40, positions="learned", max_len=32
    ),
}


@pytest.mark.parametrize("name", MODERNS)
@pytest.mark.parametrize("length", LENGTHS)
def test_modern_decoder_count_equals_the_counter(name, length):
    config = MODERNS[name]
    model, tokens = model_and_tokens(ModernDecoder, config, length)
    fused = counted(lm_step(model, tokens))
    assert fused == BATCH * length * flops_per_token(config, length, recompute=True)


@pytest.mark.parametrize(("source_len", "target_len"), [(5, 9), (20, 3), (1, 1)])
def test_translator_count_equals_the_counter(source_len, target_len):
    torch.manual_seed(0)
    config = dict(TRANSLATION_CONFIG, d_model=32, d_ff=64)  # the translator's shape, smaller
    model = make_model(61, 71, **config)
    source = torch.randint(1, 61, (BATCH, source_len))
    target = torch.randint(1, 71, (BATCH, target_len))

    def step(need_weights):
        def run():
            memory = model.encode(source, padding_mask(source, 0), need_weights)
            hidden = model.decode(
                memory,
                padding_mask(source, 0),
                target,
                target_mask(target, 0),
                need_weights,
            )
            model.generator(hidden).sum().backward()

        return run

    parts = encoder_decoder_flops(config, 71, source_len, target_len)
    assert counted(step(True)) == BATCH * sum(parts.values())
    model.eval()  # no dropout: the fused kernel (in training, dropout takes the explicit path)
    parts = encoder_decoder_flops(config, 71, source_len, target_len, recompute=True)
    assert counted(step(False)) == BATCH * sum(parts.values())


def test_the_breakdown_adds_up_and_follows_the_6n_rule():
    config = GPTS["poet-like, tied"]
    parts = flop_breakdown(config, 16)
    assert parts["embeddings"] == 0
    assert sum(parts.values()) == flops_per_token(config, 16)
    model = GPT(config)
    matmul = sum(p.numel() for name, p in model.named_parameters() if p.dim() == 2 and "positions" not in name)
    scores = 12 * config.layers * 16 * config.d_model
    assert flops_per_token(config, 16) == 6 * matmul + scores
    # the scores term alone grows with the length
    longer = flop_breakdown(config, 32)
    assert longer["attention scores"] == 2 * parts["attention scores"]
    assert longer["feed-forward"] == parts["feed-forward"]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: flops_per_token({"d_model": 8}, 4), TypeError, "got dict"),
        (lambda: flops_per_token(GPTS["poet-like, tied"], 0), ValueError, "seq_len=0"),
        (
            lambda: flops_per_token(GPTS["poet-like, tied"], 2.0),
            ValueError,
            "seq_len=2.0",
        ),
        (
            lambda: flops_per_token(GPTS["poet-like, tied"], 33),
            ValueError,
            "max_len=32",
        ),
        (
            lambda: flop_breakdown(MODERNS["learned positions, d_ff 40"], 40),
            ValueError,
            "seq_len=40",
        ),
        (lambda: encoder_decoder_flops([], 5, 3, 3), TypeError, "got list"),
        (
            lambda: encoder_decoder_flops({"layers": 2}, 5, 3, 3),
            ValueError,
            "['layers']",
        ),
        (lambda: encoder_decoder_flops({}, 0, 3, 3), ValueError, "target_vocab=0"),
        (lambda: encoder_decoder_flops({}, 5, -1, 3), ValueError, "source_len=-1"),
        (
            lambda: encoder_decoder_flops({"d_model": True}, 5, 3, 3),
            ValueError,
            "d_model=True",
        ),
        (lambda: mfu(0, 1.0, 1e9), ValueError, "flops=0"),
        (lambda: mfu(1e9, -1.0, 1e9), ValueError, "seconds=-1.0"),
        (lambda: mfu(1e9, 1.0, float("nan")), ValueError, "peak=nan"),
        (lambda: matmul_peak("cpu", torch.int32), ValueError, "torch.int32"),
        (lambda: matmul_peak("cpu", size=0), ValueError, "size=0"),
        (lambda: matmul_peak("cpu", size=8, repeats=0), ValueError, "repeats=0"),
    ],
)
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=None) as raised:
        call()
    assert message in str(raised.value)


def test_peak_and_mfu_shapes():
    rate = matmul_peak("cpu", size=64, repeats=2)
    assert isinstance(rate, float) and rate > 0  # a rate, not asserted against any speed
    assert isinstance(has_bf16_matmul("cpu"), bool)
    assert mfu(2e9, 0.5, 8e9) == pytest.approx(0.5)
    if has_bf16_matmul("cpu"):
        assert matmul_peak("cpu", torch.bfloat16, size=64, repeats=1) > 0


@pytest.mark.parametrize(("variable", "isa", "has"), [
    ("ONEDNN_MAX_CPU_ISA", "AVX2", False),  # tools/notebooks.py's avx2 kernel path
    ("ONEDNN_MAX_CPU_ISA", "sse41", False),  # its default path; oneDNN ignores case
    ("DNNL_MAX_CPU_ISA", "AVX512_CORE", False),  # the variable's older name
    ("ONEDNN_MAX_CPU_ISA", "ALL", None),  # no cap: what the CPU has
    ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX", None),
])  # fmt: skip
def test_a_cpu_capped_below_bfloat16_instructions_has_no_bf16_matmul(monkeypatch, variable, isa, has):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    hardware = has_bf16_matmul("cpu")
    monkeypatch.setenv(variable, isa)
    assert has_bf16_matmul("cpu") is (hardware if has is None else has)


def test_benchmark_training_reports_mfu_against_a_peak_of_the_same_run(monkeypatch, capsys):
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "benchmark_training.py"
    spec = importlib.util.spec_from_file_location("benchmark_training", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    tiny = "--steps 2 --warmup 0 --d-model 8 --heads 2 --layers 1 --d-ff 16 --vocab 20 --batch 2 --length 4"
    monkeypatch.setattr(sys, "argv", ["benchmark_training.py", *tiny.split(), "--peak-size", "32"])
    assert script.main() == 0
    printed = capsys.readouterr().out
    assert "measured in this run" in printed
    for name in ("ours", "nn.Transformer"):
        line = next(line for line in printed.splitlines() if line.startswith(name + " "))
        assert "tokens/s" in line and "GFLOP/s" in line and "MFU " in line
