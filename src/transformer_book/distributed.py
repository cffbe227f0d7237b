# This file is generated from book/17_past_one_machine.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Training past one machine (chapter 17): length batches shared out among processes,
the loss normalised by the global token count, gradient accumulation, mixed
precision, a checkpoint that resumes exactly, and the bytes each process holds,
on PyTorch's own engine (torch.distributed, DistributedDataParallel, FSDP2)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist

from transformer_book.batching import length_batches, pad_rows
from transformer_book.masking import padding_mask, target_mask
from transformer_book.training import paper_optimizer

NORMALISATIONS = ("tokens", "per_batch")
PRECISIONS = ("fp32", "bf16", "fp16")


def batch_stream(
    lengths: Sequence[int], max_tokens: int, seed: int = 0
) -> Iterator[list[int]]:
    """Length batches, epoch after epoch, shuffled as ``train_translator`` does.

    Epoch e's batches are ``length_batches(lengths, max_tokens, seed * 1000 + e)``,
    the order chapter 14 trains in; the stream never ends."""
    epoch = 0
    while True:
        epoch += 1
        yield from length_batches(lengths, max_tokens, seed=seed * 1000 + epoch)


def micro_batch_index(
    step: int, micro: int, rank: int, world_size: int, accumulate: int
) -> int:
    """The position in the batch stream of one process's micro-batch.

    Step ``step`` (from 0) takes the next ``world_size * accumulate`` length batches
    of the stream; micro-batch ``micro`` of process ``rank`` reads the one at
    ``(step * accumulate + micro) * world_size + rank``. One process accumulating
    ``accumulate * world_size`` micro-batches reads the same batches in the same step.
    """
    for name, value, low in (
        ("world_size", world_size, 1), ("accumulate", accumulate, 1), ("step", step, 0),
    ):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}; got {name}={value!r}")
    if not 0 <= rank < world_size or not 0 <= micro < accumulate:
        raise ValueError(
            "need 0 <= rank < world_size and 0 <= micro < accumulate; got "
            f"rank={rank}, world_size={world_size}, micro={micro}, "
            f"accumulate={accumulate}"
        )
    return (step * accumulate + micro) * world_size + rank


def all_reduce_sum(value: float, device="cpu") -> float:
    """The sum of ``value`` over every process (itself when not distributed)."""
    if not (dist.is_available() and dist.is_initialized()):
        return value
    total = torch.tensor([value], dtype=torch.float64, device=device)  # exact counts
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return float(total.item())


def scaled_loss(
    mean_loss: torch.Tensor,
    tokens: int,
    global_tokens: float,
    world_size: int,
    accumulate: int,
    normalise: str = "tokens",
) -> torch.Tensor:
    """What one micro-batch back-propagates, so that the update is the right mean.

    ``mean_loss`` is the micro-batch's loss per real target token, over ``tokens``
    tokens. DistributedDataParallel and FSDP average gradients over the
    ``world_size`` processes, so with ``normalise="tokens"`` each micro-batch sends
    its loss sum times ``world_size / global_tokens``: the average of the processes'
    gradients is then the gradient of the mean over all ``global_tokens`` tokens of
    the step. ``"per_batch"`` is the common mistake: each micro-batch's mean divided
    by ``accumulate``, so every batch weighs the same, whatever its token count.
    """
    if normalise == "tokens":
        return mean_loss * (tokens * world_size / global_tokens)
    if normalise == "per_batch":
        return mean_loss / accumulate
    raise ValueError(f"normalise must be one of {NORMALISATIONS}; got {normalise!r}")


class TranslationLoss(torch.nn.Module):
    """The translator and its loss as one module, for DDP and FSDP to wrap.

    ``forward(source, target)`` computes what chapter 9's ``sequence_loss`` does, the
    mean loss per real target token, but keeps the output layer, its log-softmax and
    the loss in float32 when autocast runs the rest in bf16 or fp16. Wrapping this,
    not the bare model, puts the generator inside the forward pass that DDP and
    FSDP see."""

    def __init__(self, model: torch.nn.Module, pad_id: int, loss_fn: torch.nn.Module):
        super().__init__()
        self.model, self.pad_id, self.loss_fn = model, pad_id, loss_fn

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        decoder_input, labels = target[:, :-1], target[:, 1:]  # (batch, t) each
        hidden = self.model(  # (batch, t, d_model), in bf16 under autocast
            source, decoder_input, padding_mask(source, self.pad_id),
            target_mask(decoder_input, self.pad_id),
        )
        if hidden.dtype in (torch.bfloat16, torch.float16):
            hidden = hidden.float()  # autocast's output: back to float32 for the head
        with torch.autocast(hidden.device.type, enabled=False):  # the head: float32
            log_probs = self.model.generator(hidden)  # (batch, t, vocab)
            return self.loss_fn(
                log_probs.reshape(-1, log_probs.size(-1)), labels.reshape(-1)
            )


def gradient_sync(model: torch.nn.Module, sync: bool):
    """A context in which backward all-reduces gradients (``sync``) or only adds them
    up locally: DDP's ``no_sync``, FSDP2's ``set_requires_gradient_sync``."""
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(sync)
    elif hasattr(model, "no_sync") and not sync:  # DDP
        return model.no_sync()
    return contextlib.nullcontext()


def world() -> tuple[int, int]:
    """(rank, world size): (0, 1) outside a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def train_steps(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule,
    examples: Sequence[tuple],
    batches: Sequence[Sequence[int]],
    pad_id: int,
    *,
    steps: int,
    start: int = 0,
    accumulate: int = 1,
    normalise: str = "tokens",
    precision: str = "fp32",
    scaler=None,
    seed: int = 0,
    device="cpu",
) -> list[float]:
    """Train steps ``start`` to ``steps`` on this process's share of ``batches``.

    ``model`` is a ``TranslationLoss``, bare or wrapped in DDP or FSDP; ``batches``
    is the batch stream (index lists into ``examples``), read by
    ``micro_batch_index``. Each step adds up ``accumulate`` micro-batches per
    process, the gradient all-reduced on the last one only; dropout is seeded by
    the micro-batch's place in the stream, so its masks do not depend on which
    process reads it. Returns each step's mean loss per target token, over every
    process's tokens.
    """
    rank, world_size = world()
    losses = []
    for step in range(start, steps):
        indices = [
            micro_batch_index(step, micro, rank, world_size, accumulate)
            for micro in range(accumulate)
        ]
        # (batch, source) and (batch, target) for each micro-batch
        pairs = [
            (pad_rows([examples[i][0] for i in batches[index]], pad_id, device),
             pad_rows([examples[i][1] for i in batches[index]], pad_id, device))
            for index in indices
        ]
        counts = [int((target[:, 1:] != pad_id).sum()) for _, target in pairs]
        global_tokens = all_reduce_sum(float(sum(counts)), device)
        optimizer.zero_grad()
        loss_sum = 0.0
        for micro, ((source, target), tokens) in enumerate(zip(pairs, counts)):
            torch.manual_seed(seed * 1_000_003 + indices[micro])  # dropout masks
            with gradient_sync(model, micro == accumulate - 1):
                with autocast_context(device, precision):
                    mean_loss = model(source, target)
                loss = scaled_loss(
                    mean_loss.float(), tokens, global_tokens, world_size, accumulate,
                    normalise,
                )
                (scaler.scale(loss) if scaler is not None else loss).backward()
            loss_sum += mean_loss.item() * tokens
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        schedule.step()
        losses.append(all_reduce_sum(loss_sum, device) / global_tokens)
    return losses


def parse_arguments(argv=None):
    """The command line of ``train_distributed`` (tools/train_distributed.py's)."""
    import argparse

    from transformer_book.translation import TRANSLATION_TRAINING

    parser = argparse.ArgumentParser(
        description="Train chapter 14's translator on several processes."
    )
    add = parser.add_argument
    add("--steps", type=int, default=20, help="optimizer steps in all")
    add("--accumulate", type=int, default=1,
        help="micro-batches added up per process per step")
    add("--strategy", choices=("ddp", "fsdp"), default="ddp")
    add("--precision", choices=PRECISIONS, default="fp32",
        help="fp16 (with a gradient scaler) needs CUDA and ddp")
    add("--normalise", choices=NORMALISATIONS, default="tokens",
        help="tokens: by the step's token count over all processes; per_batch: "
             "each batch's mean, averaged (the mistake)")
    add("--max-tokens", type=int, default=TRANSLATION_TRAINING["max_tokens"])
    add("--seed", type=int, default=TRANSLATION_TRAINING["seed"])
    add("--device", choices=("auto", "cpu", "cuda"), default="auto")
    add("--checkpoint", help="where --stop-at saves the run")
    add("--stop-at", type=int, help="stop after this step and save the run")
    add("--resume", help="a checkpoint to continue from")
    args = parser.parse_args(argv)
    for name in ("steps", "accumulate", "max_tokens"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            parser.error(f"{flag} must be >= 1; got {getattr(args, name)}")
    if (args.stop_at is None) != (args.checkpoint is None):
        parser.error("--stop-at and --checkpoint go together; got only one of them")
    if args.stop_at is not None and not 1 <= args.stop_at <= args.steps:
        parser.error(f"--stop-at must be in [1, {args.steps}]; got {args.stop_at}")
    return args


def start_processes(choice: str = "auto") -> torch.device:
    """Join the process group that torchrun describes: nccl on CUDA, else gloo.

    One GPU per process (``LOCAL_RANK``). Run without torchrun, there is no group:
    one process."""
    import os

    has_cuda = torch.cuda.device_count() > 0
    use_cuda = choice == "cuda" or (choice == "auto" and has_cuda)
    if use_cuda and not has_cuda:
        raise ValueError("device 'cuda' was asked for, but torch sees no CUDA device")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    if "RANK" in os.environ and not dist.is_initialized():  # launched by torchrun
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return device


def wrap_model(module: torch.nn.Module, strategy: str, device: torch.device):
    """DDP keeps a whole copy in every process; FSDP2 shards each layer, then the rest.

    Outside a process group the module is returned as it is."""
    if strategy not in ("ddp", "fsdp"):
        raise ValueError(f"strategy must be 'ddp' or 'fsdp'; got {strategy!r}")
    if not dist.is_initialized():
        return module
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(module, device_ids=ids)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for layer in [*module.model.encoder.layers, *module.model.decoder.layers]:
        fully_shard(layer, mesh=mesh)  # one all-gather per layer, just in time
    return fully_shard(module, mesh=mesh)  # embeddings, generator: the root group


def train_distributed(argv=None) -> dict:
    """Train chapter 14's recipe under torchrun; print and return one JSON record.

    The model, data, loss and optimiser of ``train_recipe`` (seeded, the shipped
    merges, the Tatoeba training split); ``argv`` as ``parse_arguments`` reads it.
    Process 0 prints the record as the last line: ``loss`` (the last step's mean
    loss per target token), ``parameter_sum`` (the float64 sum of every parameter),
    ``losses`` (every step's), ``bytes`` (each process's) and the settings."""
    import itertools
    import json
    import time

    from transformer_book.generator import LabelSmoothingLoss
    from transformer_book.subwords import read_merges
    from transformer_book.tatoeba import tatoeba_split
    from transformer_book.translation import TRANSLATION_TRAINING, Translator

    args = parse_arguments(argv)
    torch.set_num_threads(1)
    device = start_processes(args.device)
    rank, world_size = world()
    if args.precision == "fp16" and args.strategy != "ddp":
        raise ValueError("fp16 with a gradient scaler is written here for ddp only")
    autocast_context(device, args.precision)  # fp16 on the CPU: a clear error now
    started = time.perf_counter()
    pairs = tatoeba_split("train")
    torch.manual_seed(args.seed)  # the initial weights, the same in every process
    translator = Translator.untrained(pairs, read_merges())
    examples = translator.examples(pairs)
    lengths = [max(len(source), len(target)) for source, target in examples]
    pad_id = translator.target_vocab.pad_id
    smoothing = TRANSLATION_TRAINING["smoothing"]
    loss_fn = LabelSmoothingLoss(len(translator.target_vocab), pad_id, smoothing)
    module = TranslationLoss(translator.model.to(device).train(), pad_id, loss_fn)
    model = wrap_model(module, args.strategy, device)
    optimizer, schedule = paper_optimizer(
        model, translator.config["d_model"], TRANSLATION_TRAINING["warmup_steps"]
    )
    scaler = torch.amp.GradScaler("cuda") if args.precision == "fp16" else None
    stream = batch_stream(lengths, args.max_tokens, args.seed)
    batches = list(itertools.islice(stream, args.steps * world_size * args.accumulate))
    settings = {
        "accumulate": args.accumulate, "normalise": args.normalise,
        "max_tokens": args.max_tokens, "seed": args.seed, "smoothing": smoothing,
        "batches_per_step": world_size * args.accumulate,
    }
    start = 0
    if args.resume:
        saved = load_checkpoint(args.resume, model, optimizer, schedule)
        differing = {name: (saved["settings"][name], value)
                     for name, value in settings.items()
                     if saved["settings"][name] != value}
        if differing:
            raise ValueError(
                f"{args.resume} was saved with other settings (saved, now): {differing}"
            )
        start = saved["step"]
    stop = args.steps if args.stop_at is None else args.stop_at
    losses = train_steps(
        model, optimizer, schedule, examples, batches, pad_id, steps=stop,
        start=start, accumulate=args.accumulate, normalise=args.normalise,
        precision=args.precision, scaler=scaler, seed=args.seed, device=device,
    )
    if args.checkpoint:
        save_checkpoint(args.checkpoint, model, optimizer, schedule, stop,
                        settings=settings)
    held = [process_bytes(model, optimizer)]
    if dist.is_initialized():
        every = [None] * world_size
        dist.all_gather_object(every, held[0])
        held = every
    record = {
        "loss": losses[-1] if losses else None, "parameter_sum": parameter_sum(model),
        "losses": losses, "first_step": start + 1, "last_step": stop,
        "processes": world_size, "strategy": args.strategy,
        "precision": args.precision, "device": device.type, "bytes": held,
        "seconds": time.perf_counter() - started, **settings,
    }
    if dist.is_initialized():
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(record), flush=True)
    return record


LAUNCH_SCRIPT = """from transformer_book.distributed import train_distributed

train_distributed()
"""


def launch(arguments: Sequence[str] = (), processes: int = 2, script=None) -> dict:
    """Run ``train_distributed`` under torchrun in ``processes`` processes; its record.

    ``python -m torch.distributed.run --standalone`` (torchrun on a free port) starts
    the processes; ``script`` (default: a two-line file that calls
    ``train_distributed``) is what each runs. A failure raises with the end of the
    processes' output."""
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    if not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be an int >= 1; got {processes!r}")
    with tempfile.TemporaryDirectory() as folder:
        if script is None:
            script = Path(folder) / "train.py"
            script.write_text(LAUNCH_SCRIPT, encoding="utf-8")
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={processes}", str(script), *map(str, arguments),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"torchrun {' '.join(command[4:])} failed ({done.returncode}):\n"
            + (done.stdout + done.stderr)[-3000:]
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def autocast_context(device: torch.device | str, precision: str):
    """``torch.autocast`` for bf16 or fp16, or a context that changes nothing (fp32)."""
    device_type = torch.device(device).type
    if precision == "fp32":
        return torch.autocast(device_type, enabled=False)
    if precision == "bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    if precision == "fp16":
        if device_type != "cuda":
            raise ValueError(
                "fp16 training needs a CUDA device (and a gradient scaler); got device "
                f"{device_type!r}: use precision='bf16' on the CPU"
            )
        return torch.autocast(device_type, dtype=torch.float16)
    raise ValueError(f"precision must be one of {PRECISIONS}; got {precision!r}")


def save_checkpoint(path, model, optimizer, schedule, step: int, **extra) -> None:
    """Write everything a resumed run needs to continue exactly (rank 0 writes).

    The whole model and optimizer state (gathered from the shards under FSDP), the
    schedule, the step (the batch stream's position follows from it), torch's
    random state and ``extra`` (the settings, to check on resuming)."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_state, optimizer_state = get_state_dict(model, optimizer, options=options)
    if world()[0] == 0:
        torch.save({
            "model": model_state, "optimizer": optimizer_state,
            "schedule": schedule.state_dict(), "step": step,
            "rng": torch.get_rng_state(), **extra,
        }, path)
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def load_checkpoint(path, model, optimizer, schedule) -> dict:
    """Restore what ``save_checkpoint`` wrote into every process; return the record."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_state_dict,
    )

    saved = torch.load(path, map_location="cpu", weights_only=True)
    set_state_dict(
        model, optimizer, model_state_dict=saved["model"],
        optim_state_dict=saved["optimizer"],
        options=StateDictOptions(full_state_dict=True),
    )
    schedule.load_state_dict(saved["schedule"])
    torch.set_rng_state(saved["rng"])
    return saved


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor's own part on this process: a DTensor's shard, else the tensor."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def process_bytes(model: torch.nn.Module, optimizer=None) -> dict[str, int]:
    """The bytes this process holds of parameters, gradients and optimizer state.

    Under FSDP each parameter is a DTensor and only its shard counts; under DDP
    (or none) every process holds everything. Gradients count as the parameters'
    size whether or not they are allocated yet (they are during a step)."""
    parameters = [_local(p) for p in model.parameters()]
    held = {
        "parameters": sum(p.numel() * p.element_size() for p in parameters),
        "gradients": sum(p.numel() * p.element_size() for p in parameters),
        "optimizer": 0,
    }
    if optimizer is not None:
        for state in optimizer.state.values():
            for value in state.values():
                if torch.is_tensor(value) and value.dim() > 0:
                    local = _local(value)
                    held["optimizer"] += local.numel() * local.element_size()
    return held


def parameter_sum(model: torch.nn.Module) -> float:
    """The float64 sum of every parameter, gathered whole (a collective under FSDP)."""
    total = 0.0
    for parameter in model.parameters():
        if hasattr(parameter, "full_tensor"):  # an FSDP shard: gather the whole
            parameter = parameter.full_tensor()
        total += parameter.detach().double().sum().item()
    return total
