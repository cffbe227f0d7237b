"""Training throughput of the book's Transformer against torch.nn.Transformer, on the CPU.

    .venv/bin/python scripts/benchmark_training.py [--steps 30] [--threads 2] [--d-model 128] ...
    .venv/bin/python scripts/benchmark_training.py --tatoeba   # real batches (chapter 14)

Both models get the same configuration (d_model, heads, layers, d_ff, dropout, post-norm, final
norms in both stacks), the same embeddings + positional encoding and generator (the book's), the same
loss (label smoothing) and optimizer (Adam), and the same random token batches with padding. Training
steps alternate between the two models, so a machine that slows down mid-run slows both alike. The
script prints the median tokens per second of each (the source and decoder-input tokens of a step,
padding not counted, over the step's time; as tools/throughput.py counts the training tools') and
their ratio. A benchmark, not a test: the figures depend on the machine and its load.

Beside tokens/s it prints each model's achieved FLOP/s and its model FLOPs utilisation (MFU, chapter
18): the FLOPs of a step counted from the configuration (``encoder_decoder_flops``, padded positions
included, as the model computes them; both models do the same products), over the step's time, over
a float32 peak measured in the same run with ``matmul_peak`` on the same threads, before and after
the steps (a machine whose load changed shows two different peaks; MFU is against the higher).

``--tatoeba`` replaces the random batches by chapter 14's real ones: the Tatoeba training pairs
(English byte-pair tokens, Chinese characters, their real vocabularies) in length batches of at most
``--max-tokens`` tokens, with the shipped translator's configuration (TRANSLATION_CONFIG) unless the
size flags say otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from transformer_book import (
    EmbeddingWithPositions,
    LabelSmoothingLoss,
    OutputLayer,
    encoder_decoder_flops,
    make_model,
    matmul_peak,
    mfu,
    padding_mask,
    sequence_loss,
    subsequent_mask,
)

PAD, START = 0, 1


class TorchTransformer(nn.Module):
    """nn.Transformer between the book's embeddings and generator, with the book's calling convention.

    Our masks say True = may attend; PyTorch's boolean masks say True = may NOT attend, so they are
    inverted here.
    """

    def __init__(
        self, source_vocab: int, target_vocab: int, d_model: int, heads: int, layers: int, d_ff: int, dropout: float
    ):
        super().__init__()
        self.source_embed = EmbeddingWithPositions(source_vocab, d_model, dropout)
        self.target_embed = EmbeddingWithPositions(target_vocab, d_model, dropout)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout, batch_first=True)
        self.generator = OutputLayer(d_model, target_vocab)

    def forward(self, source, target, source_mask, target_mask):
        source_padding = ~source_mask[:, 0]  # (batch, source): True at padding
        hidden = self.transformer(
            self.source_embed(source),
            self.target_embed(target),
            tgt_mask=~target_mask[0],  # (target, target): True above the diagonal
            src_key_padding_mask=source_padding,
            tgt_key_padding_mask=(target == PAD),
            memory_key_padding_mask=source_padding,
        )
        return hidden  # (batch, target, d_model)


def torch_sequence_loss(model: TorchTransformer, source, target, loss_fn):
    decoder_input, labels = target[:, :-1], target[:, 1:]
    hidden = model(source, decoder_input, padding_mask(source, PAD), subsequent_mask(decoder_input.size(1)))
    log_probs = model.generator(hidden)
    return loss_fn(log_probs.reshape(-1, log_probs.size(-1)), labels.reshape(-1))


def random_batch(batch: int, length: int, vocab: int, generator: torch.Generator):
    """Random token sequences with a random amount of padding at the end (at least half is real)."""
    source = torch.randint(3, vocab, (batch, length), generator=generator)
    target = torch.randint(3, vocab, (batch, length + 1), generator=generator)
    target[:, 0] = START
    for tokens in (source, target):
        real = torch.randint(length // 2, tokens.size(1) + 1, (batch, 1), generator=generator)
        tokens.masked_fill_(torch.arange(tokens.size(1)) >= real, PAD)
    return source, target


def tatoeba_batches(max_tokens: int, seed: int = 0):
    """(source ids, target ids) batches of the Tatoeba training pairs, as chapter 14 trains on them,
    and the two vocabulary sizes."""
    from transformer_book import Translator, length_batches, pad_rows, read_merges, tatoeba_split

    pairs = tatoeba_split("train")
    translator = Translator.untrained(pairs, read_merges(), {"num_layers": 1, "d_model": 8, "d_ff": 8, "heads": 1})
    examples = translator.examples(pairs)
    lengths = [max(len(source), len(target)) for source, target in examples]
    batches = [
        (pad_rows([examples[i][0] for i in batch], PAD), pad_rows([examples[i][1] for i in batch], PAD))
        for batch in length_batches(lengths, max_tokens, seed=seed)
    ]
    return batches, len(translator.source_vocab), len(translator.target_vocab)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-ff", type=int, default=512)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per model first")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--tatoeba", action="store_true", help="real Tatoeba length batches (chapter 14)")
    parser.add_argument("--max-tokens", type=int, default=1500, help="token budget of a --tatoeba batch")
    parser.add_argument("--peak-size", type=int, default=1024, help="side of the matrices timed for the peak")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    source_vocab = target_vocab = args.vocab
    if args.tatoeba:
        batches, source_vocab, target_vocab = tatoeba_batches(args.max_tokens)
    torch.manual_seed(0)
    ours = make_model(
        source_vocab, target_vocab, args.layers, args.d_model, args.d_ff, args.heads, args.dropout, final_norm=True
    )  # nn.Transformer always ends both stacks with a layer norm
    theirs = TorchTransformer(
        source_vocab, target_vocab, args.d_model, args.heads, args.layers, args.d_ff, args.dropout
    )
    loss_fn = LabelSmoothingLoss(target_vocab, PAD, 0.1)
    runners = {
        "ours": (ours, lambda source, target: sequence_loss(ours, source, target, PAD, loss_fn)),
        "nn.Transformer": (theirs, lambda source, target: torch_sequence_loss(theirs, source, target, loss_fn)),
    }
    optimizers = {name: torch.optim.Adam(model.parameters(), lr=1e-4) for name, (model, _) in runners.items()}
    counts = {name: sum(p.numel() for p in model.parameters()) for name, (model, _) in runners.items()}
    data = (
        f"Tatoeba length batches of at most {args.max_tokens} tokens, vocab {source_vocab} -> {target_vocab}"
        if args.tatoeba
        else f"batch {args.batch}, length {args.length}, vocab {args.vocab}"
    )
    print(
        f"threads {torch.get_num_threads()}, d_model {args.d_model}, heads {args.heads}, layers {args.layers}+"
        f"{args.layers}, d_ff {args.d_ff}, {data}"
    )
    print("parameters: " + ", ".join(f"{name} {count:,}" for name, count in counts.items()))

    sizes = dict(num_layers=args.layers, d_model=args.d_model, d_ff=args.d_ff, heads=args.heads)
    peak_before = matmul_peak("cpu", size=args.peak_size)
    generator = torch.Generator().manual_seed(0)
    flops = []  # of each timed step, the same for both models
    seconds = {name: [] for name in runners}
    tokens = {name: [] for name in runners}
    for step in range(args.warmup + args.steps):
        if args.tatoeba:
            source, target = batches[step % len(batches)]
        else:
            source, target = random_batch(args.batch, args.length, args.vocab, generator)
        real_tokens = int((source != PAD).sum() + (target[:, :-1] != PAD).sum())  # what the model reads
        if step >= args.warmup:  # the decoder reads target[:, :-1]
            parts = encoder_decoder_flops(sizes, target_vocab, source.size(1), target.size(1) - 1)
            flops.append(source.size(0) * sum(parts.values()))
        order = list(runners) if step % 2 == 0 else list(reversed(runners))  # alternate who goes first
        for name in order:
            model, loss_of = runners[name]
            model.train()
            started = time.perf_counter()
            loss = loss_of(source, target)
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            elapsed = time.perf_counter() - started
            if step >= args.warmup:
                seconds[name].append(elapsed)
                tokens[name].append(real_tokens)

    throughput = {
        name: statistics.median(count / time_taken for count, time_taken in zip(tokens[name], seconds[name]))
        for name in runners
    }
    peak_after = matmul_peak("cpu", size=args.peak_size)
    peak = max(peak_before, peak_after)
    print(
        f"float32 peak of a {args.peak_size}x{args.peak_size} matrix product, measured in this run: "
        f"{peak_before / 1e9:.1f} GFLOP/s before the steps, {peak_after / 1e9:.1f} after"
    )
    for name in runners:
        rate = statistics.median(count / time_taken for count, time_taken in zip(flops, seconds[name]))
        utilisation = statistics.median(mfu(count, time_taken, peak) for count, time_taken in zip(flops, seconds[name]))
        print(
            f"{name:15s} median step {1000 * statistics.median(seconds[name]):7.1f} ms   "
            f"{throughput[name]:9.0f} tokens/s (padding not counted)   {rate / 1e9:6.1f} GFLOP/s   "
            f"MFU {utilisation:.0%}"
        )
    print(f"ours / nn.Transformer: {throughput['ours'] / throughput['nn.Transformer']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
