"""tools/train_distributed.py and transformer_book.distributed: two processes (DDP and FSDP,
gloo, launched by torchrun) train chapter 14's translator as one process accumulating two
micro-batches does, within the tool's TOLERANCE; the per-batch mean does not; a run stopped at
step 10 and resumed (in new processes) equals the uninterrupted one bit for bit, under DDP
and FSDP; bf16 stays close to float32.

The runs use the recipe's model and data with 400-token length batches (the recipe's are
1,500) for speed; ``python tools/train_distributed.py --check`` repeats them at full size."""

import copy
import json

import pytest
import torch

import train_distributed as tool
from transformer_book import (
    autocast_context,
    launch,
    micro_batch_index,
    parameter_sum,
    process_bytes,
    scaled_loss,
    train_distributed,
)

COMMON = ["--steps", "20", "--max-tokens", "400", "--device", "cpu"]

# Each torchrun launch starts an agent and two workers, each importing torch and reading the
# data: about 10 CPU seconds before the first step, more than the 20 steps cost. So the
# two-process runs share two launches: the first runs the whole DDP and FSDP runs and the
# runs stopped at step 10 one after another in the same process group; the second resumes
# the stopped runs in fresh processes, as a restarted job would. (``train_distributed`` ends
# its process group; between runs the script below keeps it for the next.)
SEVERAL_RUNS = """import json, sys

import torch.distributed as dist

from transformer_book import train_distributed

end_group, dist.destroy_process_group = dist.destroy_process_group, lambda *args: None
records = [train_distributed(arguments) for arguments in json.loads(sys.argv[1])]
if dist.is_initialized():
    rank = dist.get_rank()
    end_group()
    if rank == 0:
        print(json.dumps({"records": records}))
"""


def launch_runs(runs: dict, script) -> dict:
    """name -> record of ``runs`` (name -> arguments), run in turn by one launch of
    2 processes."""
    found = launch([json.dumps(list(runs.values()))], 2, script=script)["records"]
    assert len(found) == len(runs) and all(r["processes"] == 2 for r in found)
    return dict(zip(runs, found, strict=True))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The runs of tools/train_distributed.RUNS, smaller; single processes in this one;
    and FSDP stopped at step 10 and resumed."""
    folder = tmp_path_factory.mktemp("distributed")
    script = folder / "several_runs.py"
    script.write_text(SEVERAL_RUNS, encoding="utf-8")
    checkpoint, sharded = str(folder / "checkpoint.pt"), str(folder / "sharded.pt")
    fsdp = [*COMMON, "--strategy", "fsdp"]
    found = {
        tool.REFERENCE: train_distributed([*COMMON, "--accumulate", "2"]),
        "1 process, per-batch mean": train_distributed([*COMMON, "--accumulate", "2", "--normalise", "per_batch"]),
        "1 process, bf16": train_distributed([*COMMON, "--accumulate", "2", "--precision", "bf16"]),
    }
    found |= launch_runs({
        "2 processes, DDP": COMMON,
        "2 processes, FSDP": fsdp,
        "stopped at 10": [*COMMON, "--stop-at", "10", "--checkpoint", checkpoint],
        "FSDP stopped at 10": [*fsdp, "--stop-at", "10", "--checkpoint", sharded],
    }, script)  # fmt: skip
    found |= launch_runs({
        "resumed at 10": [*COMMON, "--resume", checkpoint],
        "FSDP resumed at 10": [*fsdp, "--resume", sharded],
    }, script)  # fmt: skip
    return found


def test_two_processes_equal_one_process_accumulating(runs):
    found = tool.differences(runs)
    for name in ("2 processes, DDP", "2 processes, FSDP"):
        for key, tolerance in tool.TOLERANCE.items():
            assert found[name][key] <= tolerance, (name, key, found[name][key])
    assert runs["2 processes, DDP"]["processes"] == 2 and runs[tool.REFERENCE]["processes"] == 1
    assert len(runs["2 processes, DDP"]["losses"]) == 20


def test_the_per_batch_mean_breaks_the_equivalence(runs):
    found = tool.differences(runs)["1 process, per-batch mean"]
    assert found["parameter_sum"] > 10 * tool.TOLERANCE["parameter_sum"]
    assert found["loss"] > 3 * tool.TOLERANCE["loss"]


def test_resumed_run_equals_the_uninterrupted_one_bit_for_bit(runs):
    resumed, whole = runs["resumed at 10"], runs["2 processes, DDP"]
    assert runs["stopped at 10"]["losses"] == whole["losses"][:10]
    assert resumed["first_step"] == 11 and resumed["losses"] == whole["losses"][10:]
    assert resumed["parameter_sum"] == whole["parameter_sum"]


def test_fsdp_resumes_bit_for_bit_too(runs):
    whole = runs["2 processes, FSDP"]
    stopped, resumed = runs["FSDP stopped at 10"], runs["FSDP resumed at 10"]
    assert resumed["first_step"] == 11 and stopped["strategy"] == resumed["strategy"] == "fsdp"
    assert stopped["losses"] + resumed["losses"] == whole["losses"]
    assert resumed["parameter_sum"] == whole["parameter_sum"]


def test_bf16_follows_float32_closely_but_not_exactly(runs):
    bf16, fp32 = runs["1 process, bf16"]["losses"], runs[tool.REFERENCE]["losses"]
    gaps = [abs(a - b) for a, b in zip(bf16, fp32)]
    assert 0 < max(gaps) < 2e-3  # measured: 3.1e-4 over 20 steps


def test_fsdp_shards_parameters_and_optimizer_state(runs):
    ddp, fsdp = runs["2 processes, DDP"]["bytes"], runs["2 processes, FSDP"]["bytes"]
    assert ddp[0] == ddp[1] and ddp[0]["optimizer"] == 2 * ddp[0]["parameters"]  # Adam: m, v
    for key in ("parameters", "optimizer"):
        assert sum(process[key] for process in fsdp) == ddp[0][key]  # each holds a share
        assert max(process[key] for process in fsdp) < 0.51 * ddp[0][key]


def test_problems_finds_a_broken_equivalence(runs):
    names = ("2 processes, DDP", "2 processes, FSDP", "resumed at 10", tool.REFERENCE)
    good = {name: runs[name] for name in names}
    good["2 processes, per-batch mean"] = runs["1 process, per-batch mean"]
    assert tool.problems(good) == []
    broken = dict(good, **{"2 processes, FSDP": runs["1 process, per-batch mean"]})
    assert any("FSDP" in line for line in tool.problems(broken))


def test_the_record_agrees_with_itself_and_a_changed_run_is_found():
    saved = json.loads(tool.RECORD.read_text(encoding="utf-8"))
    assert set(saved["runs"]) == set(tool.RUNS) and tool.problems(saved["runs"]) == []
    assert tool.against_record(saved["runs"], saved) == []
    changed = copy.deepcopy(saved["runs"])
    changed["resumed at 10"]["losses"][-1] += 1e-5
    changed["2 processes, FSDP"]["parameter_sum"] += 0.01
    assert tool.against_record(changed, saved) == [
        "2 processes, FSDP: parameter_sum differs from the record by 0.01",
        "resumed at 10: loss differs from the record by 1e-05",
    ]


def test_micro_batches_cover_the_stream_once_in_the_same_steps():
    for world_size, accumulate in ((1, 4), (2, 2), (4, 1)):
        read = [
            [
                micro_batch_index(step, micro, rank, world_size, accumulate)
                for rank in range(world_size)
                for micro in range(accumulate)
            ]
            for step in range(3)
        ]
        assert [sorted(indices) for indices in read] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_scaled_loss_makes_the_average_of_gradients_the_token_mean():
    sums, counts = torch.tensor([6.0, 1.0]), [3, 1]  # two processes' loss sums and tokens
    means = [total / count for total, count in zip(sums, counts)]
    per_process = [scaled_loss(m, n, sum(counts), 2, 1) for m, n in zip(means, counts)]
    assert torch.isclose(sum(per_process) / 2, sums.sum() / 4)  # (6 + 1) / 4, not (2 + 1) / 2
    naive = [scaled_loss(m, n, sum(counts), 2, 1, "per_batch") for m, n in zip(means, counts)]
    assert torch.isclose(sum(naive) / 2, torch.tensor(1.5))


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="normalise must be one of .* got 'mean'"):
        scaled_loss(torch.tensor(1.0), 1, 1, 1, 1, "mean")
    with pytest.raises(ValueError, match="fp16 training needs a CUDA device"):
        autocast_context("cpu", "fp16")
    with pytest.raises(ValueError, match="precision must be one of .* got 'fp8'"):
        autocast_context("cpu", "fp8")
    with pytest.raises(ValueError, match="accumulate must be an int >= 1; got accumulate=0"):
        micro_batch_index(0, 0, 0, 1, 0)
    with pytest.raises(ValueError, match="rank=2, world_size=2"):
        micro_batch_index(0, 0, 2, 2, 1)
    with pytest.raises(SystemExit):  # argparse: "--stop-at and --checkpoint go together"
        train_distributed(["--stop-at", "3"])
    with pytest.raises(ValueError, match="processes must be an int >= 1; got 0"):
        launch([], 0)


def test_a_failing_launch_shows_the_processes_output(tmp_path):
    script = tmp_path / "fails.py"  # a process that fails at once, without importing torch
    script.write_text('raise ValueError("no batches for rank 0")\n', encoding="utf-8")
    with pytest.raises(RuntimeError, match="(?s)failed.*no batches for rank 0"):
        launch([], 1, script=script)
    with pytest.raises(SystemExit):  # what argparse does with a bad --stop-at
        train_distributed(["--steps", "2", "--stop-at", "5", "--checkpoint", "x.pt"])


def test_resuming_with_other_settings_is_refused(runs, tmp_path):
    checkpoint = tmp_path / "one.pt"
    train_distributed([*COMMON, "--steps", "1", "--stop-at", "1", "--checkpoint", str(checkpoint)])
    with pytest.raises(ValueError, match="saved with other settings.*'accumulate': \\(1, 2\\)"):
        train_distributed([*COMMON, "--steps", "2", "--accumulate", "2", "--resume", str(checkpoint)])


def test_bytes_and_sum_of_a_plain_model():
    model = torch.nn.Linear(3, 2)  # 8 float32 parameters
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    assert process_bytes(model, optimizer) == {"parameters": 32, "gradients": 32, "optimizer": 64}
    expected = sum(p.double().sum().item() for p in model.parameters())
    assert parameter_sum(model) == expected
