"""tools/train_distributed.py's GPU record (``--record --cuda``): what it demands of the runs, checked on
made-up records here (the runs themselves need a GPU; chapter 17 reads the record a GPU wrote)."""

import copy
import json

import pytest
import torch

import train_distributed as tool


def _run(losses, parameter_sum, first_step=1):
    return {
        "losses": losses,
        "loss": losses[-1],
        "parameter_sum": parameter_sum,
        "first_step": first_step,
        "last_step": first_step + len(losses) - 1,
    }


@pytest.fixture
def runs():
    whole = [6.0 - 0.01 * step for step in range(20)]
    return {
        tool.CUDA_REFERENCE: _run(whole, 1315.4393),
        "1 GPU, FSDP": _run([loss + 1e-6 for loss in whole], 1315.4395),
        "1 GPU, bf16": _run([loss + 1e-2 for loss in whole], 1316.2),
        "1 GPU, fp16 with a scaler": _run([loss + 1e-2 for loss in whole], 1316.1),
        "1 GPU, stopped at 10": _run(whole[:10], 1314.0),
        "1 GPU, resumed at 10": _run(whole[10:], 1315.4393, first_step=11),
    }


def test_fsdp_and_the_resumed_run_must_agree_with_ddp(runs):
    assert tool.cuda_problems(runs) == []
    assert tool.same_bits(runs["1 GPU, resumed at 10"], runs[tool.CUDA_REFERENCE])
    broken = copy.deepcopy(runs)
    broken["1 GPU, resumed at 10"]["losses"][0] += 1e-3  # a resume that lost the schedule's place
    assert tool.cuda_problems(broken) == ["1 GPU, resumed at 10: loss off by 0.001 > 2e-06"]
    broken = copy.deepcopy(runs)
    broken["1 GPU, FSDP"]["parameter_sum"] += 0.1
    assert tool.cuda_problems(broken) == ["1 GPU, FSDP: parameter_sum off by 0.1 > 0.002"]


def test_16_bit_runs_are_reported_not_required(runs):
    assert tool.cuda_problems(runs) == []  # bf16 and fp16 are other runs: their gaps are measured
    record = tool.cuda_record(runs, {"gpu": "a GPU"})
    assert record["differences"]["1 GPU, bf16"]["loss"] == pytest.approx(1e-2)
    assert record["resumed_bit_for_bit"] is True


def test_the_shipped_gpu_record_is_what_the_tool_writes():
    """weights/distributed_runs_cuda.json, which chapter 17 reads: every run of CUDA_RUNS, on CUDA,
    its differences recomputed from its runs, and no problem."""
    record = json.loads(tool.RECORD_CUDA.read_text(encoding="utf-8"))
    assert list(record["runs"]) == list(tool.CUDA_RUNS)
    assert all(run["device"] == "cuda" and run["processes"] == 1 for run in record["runs"].values())
    again = tool.cuda_record(record["runs"], record["machine"])
    assert again["differences"] == record["differences"]
    assert again["resumed_bit_for_bit"] == record["resumed_bit_for_bit"]
    assert tool.cuda_problems(record["runs"]) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the record would be rewritten")
def test_the_gpu_record_refuses_a_machine_without_one():
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        tool.main(["--record", "--cuda"])


def test_the_gpu_runs_are_the_chapter_s_20_steps_on_one_gpu():
    assert {processes for processes, _ in tool.CUDA_RUNS.values()} == {1}  # NCCL: one GPU a process
    precisions = [settings.get("precision", "fp32") for _, settings in tool.CUDA_RUNS.values()]
    assert precisions.count("bf16") == precisions.count("fp16") == 1
    json.dumps(tool.CUDA_RUNS)  # settings that travel to torchrun as JSON
