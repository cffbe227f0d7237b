#!/usr/bin/env bash
# What a machine with a GPU checks, in one run (MAINTAINING.md, "On a real GPU"):
#   1. every chapter executed on the GPU by tools/run_chapters_plain.py, four groups side by side,
#      each chapter's outputs compared with the stored (CPU) ones;
#   2. chapter 17's GPU paths, `tools/train_distributed.py --record --cuda`: NCCL with DDP, FSDP2,
#      bf16, fp16 with its gradient scaler, a checkpoint written at step 10 and resumed; the record,
#      weights/distributed_runs_cuda.json, is what chapter 17 reads.
# PARTS (default "chapters distributed") picks them.
# Run from the repository root with the package's dependencies importable (the chapters' own: torch,
# altair, pandas, tokenizers, sacrebleu, transformers, IPython). Results go to $WORK (default
# /tmp/device_checks): gpu.txt, chapters_N.json and .log, distributed.log and the GPU's record; with
# $OUT set, all of them packed into $OUT/device_checks.tgz as well.
#
#   bash tools/device_checks.sh
#   PARTS=chapters DEVICE=cpu CHAPTERS="book/01_positional_encoding.ipynb" bash tools/device_checks.sh  # a try
set -u
WORK=${WORK:-/tmp/device_checks}
DEVICE=${DEVICE:-cuda}
LIMIT=${LIMIT:-330}
PARTS=${PARTS:-chapters distributed}
rm -rf "$WORK"
mkdir -p "$WORK"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
    nproc
} >"$WORK/gpu.txt" 2>&1

# Four groups of about equal running time (chapter 14, the longest, nearly alone).
if [ -n "${CHAPTERS:-}" ]; then
    groups=("$CHAPTERS")
else
    groups=(
        "book/14_translating.ipynb book/01_positional_encoding.ipynb book/02_scaled_dot_product_attention.ipynb book/03_multi_head_attention.ipynb book/intro.ipynb"
        "book/15_writing_poems.ipynb book/16_modern_decoder.ipynb book/04_add_and_norm.ipynb book/05_feed_forward.ipynb"
        "book/11_inside_the_model.ipynb book/12_search_matters.ipynb book/13_tokens_from_text.ipynb book/06_masking.ipynb book/07_cross_attention.ipynb"
        "book/17_past_one_machine.ipynb book/18_what_training_costs.ipynb book/19_instructions_and_lora.ipynb book/09_full_transformer.ipynb book/10_decoding.ipynb book/08_linear_and_softmax.ipynb"
    )
fi
i=0
[[ " $PARTS " == *" chapters "* ]] || groups=()
for group in "${groups[@]}"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=4 timeout "$LIMIT" python3 tools/run_chapters_plain.py $group --device "$DEVICE" \
        --json "$WORK/chapters_$i.json" >"$WORK/chapters_$i.log" 2>&1 &
done

# Chapter 17's GPU paths, as its record: one process on the GPU with NCCL (tools/train_distributed.py).
if [[ " $PARTS " == *" distributed "* ]]; then
    (
        OMP_NUM_THREADS=2 timeout "$LIMIT" python3 tools/train_distributed.py --record --cuda \
            >"$WORK/distributed.log" 2>&1
        cp src/transformer_book/weights/distributed_runs_cuda.json "$WORK/" 2>/dev/null
    ) &
fi
wait
cat "$WORK"/chapters_*.log "$WORK"/distributed.log 2>/dev/null | grep -v "^    "
if [ -n "${OUT:-}" ]; then
    tar czf "$OUT/device_checks.tgz" -C "$WORK" .
fi
