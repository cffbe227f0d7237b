"""tools/train_distributed.py and the distributed modules: two processes (DDP, the
hand-written bucketed DDP and FSDP, gloo, launched by torchrun) train chapter 14's translator
as one process accumulating two micro-batches does, within the tool's TOLERANCE (DDP and the
hand-written wrapper bit for bit, on the CPU with 2 processes); the per-batch mean does not; a
run stopped at step 3 and resumed from its sharded checkpoint (in new processes) equals the
uninterrupted one bit for bit: under DDP, under FSDP, on 1 process accumulating 2 micro-batches
instead of 2 processes, and with dropout drawn from each process's own random state (no
per-batch reseeding: only the per-rank random state saved in the checkpoint makes it exact).

The runs use the recipe's model and data with 400-token length batches (the recipe's are
1,500) and 6 steps (a warm-up of 100 steps, not 1,000, so that the rate moves the weights) for speed; ``python tools/train_distributed.py --check`` repeats them at
full size."""

import copy
import functools
import inspect
import json

import pytest
import torch

import train_distributed as tool
from transformer_book import (
    DistributedRun,
    Translator,
    autocast_context,
    micro_batch_index,
    parameter_sum,
    process_bytes,
    recipe,
    scaled_loss,
    train_distributed,
)

COMMON = {"steps": 6, "max_tokens": 400, "warmup_steps": 100, "device": "cpu"}


def encode_once(examples):
    """``Translator.examples`` that encodes each set of pairs once per process.

    Every run below reads the same training pairs with the same vocabularies and merges,
    and encoding them (BPE on 27,583 references) costs about 2 s a run, more than its six
    steps. The examples are a function of those alone, so a later run gets the list the
    first run made (a new list of the same tuples)."""
    made = {}

    @functools.wraps(examples)
    def once(self, pairs):
        key = (
            tuple(self.source_vocab.tokens),
            tuple(self.target_vocab.tokens),
            tuple(self.bpe.merges),
            tuple((english, tuple(references)) for english, references in pairs),
        )
        if key not in made:
            made[key] = examples(self, pairs)
        return list(made[key])

    return once


# Each torchrun launch starts an agent and two workers, each importing torch and reading the
# data: about 10 CPU seconds before the first step, more than the steps cost. So the
# two-process runs share two launches: the first runs the whole runs and the runs stopped at
# step 3 one after another in the same process group; the second resumes the stopped runs
# in fresh processes, as a restarted job would. (``train_distributed`` ends its process
# group; between runs the script below keeps it for the next.)
SEVERAL_RUNS = """import functools, json, sys

import torch
import torch.distributed as dist

from transformer_book import DistributedRun, Translator, train_distributed

torch.set_num_threads(1)
{encode_once}
Translator.examples = encode_once(Translator.examples)
end_group, dist.destroy_process_group = dist.destroy_process_group, lambda *args: None
runs = [DistributedRun(**settings) for settings in json.loads(sys.argv[2])]
records = [train_distributed(run) for run in runs]
if dist.is_initialized():
    rank = dist.get_rank()
    end_group()
    if rank == 0:
        print(json.dumps({"records": records}))
""".replace("{encode_once}", inspect.getsource(encode_once))


class Several:
    """What ``tool.launch`` sends: the settings of several runs, as one JSON list."""

    def __init__(self, runs):
        self.runs = runs

    def to_json(self):
        return json.dumps([{**COMMON, **settings} for settings in self.runs])


def launch_runs(runs: dict, script) -> dict:
    """name -> record of ``runs`` (name -> settings), run in turn by one launch of
    2 processes."""
    found = tool.launch(Several(list(runs.values())), 2, script=script)["records"]
    assert len(found) == len(runs) and all(r["processes"] == 2 for r in found)
    return dict(zip(runs, found, strict=True))


def here(**settings):
    """A run in this process (no process group), its record."""
    return train_distributed(DistributedRun(**{**COMMON, **settings}))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Where the runs keep their checkpoints."""
    return tmp_path_factory.mktemp("distributed")


@pytest.fixture(scope="module")
def runs(folder):
    """The runs of tools/train_distributed.RUNS, smaller, and FSDP stopped and resumed;
    single processes in this one."""
    script = folder / "several_runs.py"
    script.write_text(SEVERAL_RUNS, encoding="utf-8")
    ddp, fsdp, own = folder / "ddp", folder / "fsdp", folder / "own"
    stop = {"stop_at": 3}
    found = launch_runs({
        "2 processes, DDP": {},
        "2 processes, hand-written DDP": {"strategy": "buckets"},
        "2 processes, FSDP": {"strategy": "fsdp"},
        "2 processes, own dropout": {"reseed": False},
        "stopped at 3": {**stop, "checkpoint": str(ddp)},
        "FSDP stopped at 3": {**stop, "strategy": "fsdp", "checkpoint": str(fsdp)},
        "own dropout, stopped at 3": {**stop, "reseed": False, "checkpoint": str(own)},
    }, script)  # fmt: skip
    found |= launch_runs({
        "resumed at 3": {"resume": str(ddp)},
        "FSDP resumed at 3": {"strategy": "fsdp", "resume": str(fsdp)},
        "own dropout, resumed at 3": {"reseed": False, "resume": str(own)},
    }, script)  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:  # the 1-process runs: in this process
        patch.setattr(Translator, "examples", encode_once(Translator.examples))
        found |= {
            tool.REFERENCE: here(accumulate=2),
            "1 process, per-batch mean": here(accumulate=2, normalise="per_batch"),
            "1 process, bf16": here(accumulate=2, precision="bf16"),
            "resumed at 3 in 1 process": here(accumulate=2, resume=str(ddp)),
        }
    return found


def test_two_processes_equal_one_process_accumulating(runs):
    found = tool.differences(runs)
    for name in (
        "2 processes, DDP",
        "2 processes, hand-written DDP",
        "2 processes, FSDP",
    ):
        for key, tolerance in tool.TOLERANCE.items():
            assert found[name][key] <= tolerance, (name, key, found[name][key])
    assert tool.same_bits(runs["2 processes, DDP"], runs[tool.REFERENCE])  # 2 processes, CPU
    assert runs["2 processes, DDP"]["processes"] == 2 and runs[tool.REFERENCE]["processes"] == 1
    assert len(runs["2 processes, DDP"]["losses"]) == 6


def test_the_hand_written_wrapper_equals_ddp_and_overlaps_the_backward(runs):
    hand, ddp = runs["2 processes, hand-written DDP"], runs["2 processes, DDP"]
    assert tool.same_bits(hand, ddp)  # bit for bit, gloo on the CPU, 2 processes
    events = [name for name, _ in hand["timeline"]]
    sent = [name for name in events if name.endswith("sent")]
    assert len(sent) > 2 and events[len(sent) :] == [
        "backward ended",
        "averages written",
    ]
    assert len(set(sent)) == len(sent)  # every bucket sent once
    assert hand["bytes"][0]["buckets"] == ddp["bytes"][0]["buckets"] == ddp["bytes"][0]["gradients"]


def test_the_per_batch_mean_breaks_the_equivalence(runs):
    found = tool.differences(runs)["1 process, per-batch mean"]
    assert found["parameter_sum"] > 10 * tool.TOLERANCE["parameter_sum"]
    assert found["loss"] > 3 * tool.TOLERANCE["loss"]


@pytest.mark.parametrize(
    "resumed, whole",
    [
        ("resumed at 3", "2 processes, DDP"),
        ("FSDP resumed at 3", "2 processes, FSDP"),
        ("resumed at 3 in 1 process", "2 processes, DDP"),
        ("own dropout, resumed at 3", "2 processes, own dropout"),
    ],
)
def test_a_resumed_run_equals_the_uninterrupted_one_bit_for_bit(runs, resumed, whole):
    stopped = {
        "FSDP resumed at 3": "FSDP stopped at 3",
        "own dropout, resumed at 3": "own dropout, stopped at 3",
    }
    stopped_run = runs[stopped.get(resumed, "stopped at 3")]
    assert stopped_run["losses"] + runs[resumed]["losses"] == runs[whole]["losses"]
    assert runs[resumed]["first_step"] == 4 and runs[resumed]["last_step"] == 6
    assert runs[resumed]["parameter_sum"] == runs[whole]["parameter_sum"]


def test_own_dropout_is_another_run_so_the_random_state_mattered(runs):
    own, reseeded = runs["2 processes, own dropout"], runs["2 processes, DDP"]
    assert own["losses"][0] != reseeded["losses"][0]  # other dropout masks from step 1


def test_bf16_follows_float32_closely_but_not_exactly(runs):
    bf16, fp32 = runs["1 process, bf16"]["losses"], runs[tool.REFERENCE]["losses"]
    gaps = [abs(a - b) for a, b in zip(bf16, fp32)]
    assert 0 < max(gaps) < 2e-3  # measured: 3e-4 over 6 steps


def test_fsdp_shards_parameters_and_optimizer_state(runs):
    ddp, fsdp = runs["2 processes, DDP"]["bytes"], runs["2 processes, FSDP"]["bytes"]
    assert ddp[0] == ddp[1] and ddp[0]["optimizer"] == 2 * ddp[0]["parameters"]  # Adam: m, v
    for key in ("parameters", "optimizer"):
        assert sum(process[key] for process in fsdp) == ddp[0][key]  # each holds a share
        assert max(process[key] for process in fsdp) < 0.51 * ddp[0][key]
    assert fsdp[0]["buckets"] == 0


def test_problems_finds_a_broken_equivalence(runs):
    rename = {"stopped at 3": "stopped at 10", "resumed at 3": "resumed at 10"}
    good = {rename.get(name, name): run for name, run in runs.items()}
    good["2 processes, per-batch mean"] = runs["1 process, per-batch mean"]
    assert tool.problems(good) == []
    broken = dict(good, **{"2 processes, FSDP": runs["1 process, per-batch mean"]})
    assert any("FSDP" in line for line in tool.problems(broken))
    broken = dict(good, **{"resumed at 10": runs["own dropout, resumed at 3"]})
    assert tool.problems(broken) == ["resumed at 10 differs from 2 processes, DDP (expected bit for bit)"]


def test_the_record_agrees_with_itself_and_a_changed_run_is_found():
    saved = json.loads(tool.RECORD.read_text(encoding="utf-8"))
    assert set(saved["runs"]) == set(tool.RUNS) and set(saved["long_runs"]) == set(tool.LONG_RUNS)
    assert tool.problems(saved["runs"]) == []
    assert tool.against_record(saved["runs"], saved) == []
    changed = copy.deepcopy(saved["runs"])
    changed["resumed at 10"]["losses"][-1] += 1e-5
    changed["2 processes, FSDP"]["parameter_sum"] += 0.01
    assert tool.against_record(changed, saved) == [
        "2 processes, FSDP: parameter_sum differs from the record by 0.01",
        "resumed at 10: loss differs from the record by 1e-05",
    ]
    long = saved["long_runs"]["long, float32"]
    assert long["last_step"] == tool.LONG["steps"] and long["warmup_steps"] < long["last_step"]


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
        assert [sorted(indices) for indices in read] == [
            [0, 1, 2, 3],
            [4, 5, 6, 7],
            [8, 9, 10, 11],
        ]


def test_scaled_loss_makes_the_average_of_gradients_the_token_mean():
    sums, counts = (
        torch.tensor([6.0, 1.0]),
        [3, 1],
    )  # two processes' loss sums and tokens
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
    with pytest.raises(ValueError, match="steps must be an int >= 1; got steps=0"):
        DistributedRun(steps=0)
    with pytest.raises(ValueError, match="strategy must be one of .* got 'zero'"):
        DistributedRun(strategy="zero")
    with pytest.raises(ValueError, match="stop_at and checkpoint go together"):
        DistributedRun(stop_at=3)
    with pytest.raises(ValueError, match="stop_at must be in \\[1, 2\\]; got 5"):
        DistributedRun(steps=2, stop_at=5, checkpoint="x")
    with pytest.raises(ValueError, match="lr_factor must be > 0; got 0"):
        DistributedRun(lr_factor=0)
    with pytest.raises(ValueError, match="fp16 is written here for ddp only; got 'fsdp'"):
        DistributedRun(precision="fp16", strategy="fsdp")
    with pytest.raises(ValueError, match="processes must be an int >= 1; got 0"):
        tool.launch(DistributedRun(), 0)
    for bad in (-1, "1", 1.0):
        with pytest.raises(ValueError, match=f"init_seed must be None or an int >= 0; got {bad!r}"):
            DistributedRun(init_seed=bad)


def test_init_seed_changes_the_weights_and_the_dropout_not_the_batches(monkeypatch):
    """The yardstick run of the record ("long, float32, init seed 1"): another float32 run on
    the same batches."""
    assert DistributedRun().weights_seed == DistributedRun().seed
    assert DistributedRun(init_seed=1).weights_seed == 1
    monkeypatch.setattr(Translator, "examples", encode_once(Translator.examples))
    first, other = (recipe(DistributedRun(init_seed=seed, **COMMON), torch.device("cpu")) for seed in (None, 1))
    assert first["batches"] == other["batches"]
    assert parameter_sum(first["model"]) != parameter_sum(other["model"])


def test_the_command_line_makes_the_same_settings():
    flags = [
        "--steps",
        "5",
        "--accumulate",
        "2",
        "--no-reseed",
        "--lr-factor",
        "0.5",
        "--warmup-steps",
        "50",
    ]
    run = tool.parse_run(flags)
    assert run == DistributedRun(steps=5, accumulate=2, reseed=False, lr_factor=0.5, warmup_steps=50)
    assert tool.parse_run(["--settings", run.to_json()]) == run == DistributedRun.from_json(run.to_json())
    with pytest.raises(SystemExit):  # argparse's error: "stop_at and checkpoint go together"
        tool.parse_run(["--stop-at", "3"])


def test_a_failing_launch_shows_the_processes_output(tmp_path):
    script = tmp_path / "fails.py"  # a process that fails at once, without importing torch
    script.write_text('raise ValueError("no batches for rank 0")\n', encoding="utf-8")
    with pytest.raises(RuntimeError, match="(?s)failed.*no batches for rank 0"):
        tool.launch(DistributedRun(), 1, script=script)


def test_resuming_with_other_settings_is_refused(runs, folder):
    # the DDP checkpoint of 2 processes (2 batches a step), resumed by 1 process reading 1
    with pytest.raises(ValueError, match="saved with other settings.*'batches_per_step': \\(2, 1\\)"):
        here(resume=str(folder / "ddp"))


def test_bytes_and_sum_of_a_plain_model():
    model = torch.nn.Linear(3, 2)  # 8 float32 parameters
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    expected = {"parameters": 32, "gradients": 32, "buckets": 0, "optimizer": 64}
    assert process_bytes(model, optimizer) == expected
    assert parameter_sum(model) == sum(p.double().sum().item() for p in model.parameters())
