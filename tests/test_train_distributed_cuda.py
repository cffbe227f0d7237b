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
        "1 GPU, stopped at 10": _run(whole[:10], 1314.0),
        "1 GPU, resumed at 10": _run(whole[10:], 1315.4393, first_step=11),
        "the CPU, 1 process": _run([loss + 3e-5 for loss in whole], 1315.44),
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


def test_the_cpu_beside_the_gpu_is_reported_not_required(runs):
    runs["the CPU, 1 process"]["parameter_sum"] += 1.0  # another machine's rounding: recorded, not a failure
    assert tool.cuda_problems(runs) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the record would be rewritten")
def test_the_gpu_record_refuses_a_machine_without_one():
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        tool.main(["--record", "--cuda"])


def test_the_gpu_runs_are_the_chapter_14_recipe_on_one_gpu():
    assert {processes for processes, _ in tool.CUDA_RUNS.values()} == {1}  # NCCL: one GPU a process
    assert tool.CUDA_RUNS["the CPU, 1 process"][1] == {"device": "cpu"}
    precisions = [settings.get("precision", "fp32") for _, settings in tool.CUDA_LONG_RUNS.values()]
    assert precisions == ["fp32", "bf16", "fp16"]
    assert all(settings["steps"] == tool.LONG["steps"] for _, settings in tool.CUDA_LONG_RUNS.values())
    json.dumps(tool.CUDA_RUNS)  # settings that travel to torchrun as JSON
