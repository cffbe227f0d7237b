"""The playground's weights files (book/_static/playground/): write them, read them back.

Each model gets two files: ``NAME.bin``, every tensor of its state dict as little-endian float32,
one after the other (a tensor shared by several names, as with tied weights, is stored once), or
with every matrix in 8 bits (``export_quantized``: each row as int8 with one float32 scale); and
``NAME.json``: make_model's arguments, the vocabularies, the decoding limits and each tensor's name,
shape and offset in the binary file. ``load_model`` reads them back into the package's model, as the
browser's model (book/_static/playground/transformer.js) does. Written by tools/export_playground.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from notebooks import REPO_ROOT
from transformer_book import make_model

OUT_DIR = REPO_ROOT / "book" / "_static" / "playground"
FORMAT = "transformer-book-playground/1"
MAX_BYTES = 1_000_000  # MAINTAINING.md promises less than 1 MB per weights file


def tensor_table(model: torch.nn.Module) -> tuple[list[dict], bytes]:
    """The state dict as (name, shape, offset in floats of each tensor; the bytes)."""
    entries, chunks, stored, offset = [], [], {}, 0
    for name, tensor in model.state_dict().items():
        # Tied weights share their storage: stored once, listed under every name.
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key not in stored:
            stored[key] = offset
            data = tensor.detach().cpu().to(torch.float32).contiguous().numpy().astype("<f4")
            chunks.append(data.tobytes())
            offset += tensor.numel()
        entries.append({"name": name, "shape": list(tensor.shape), "offset": stored[key]})
    return entries, b"".join(chunks)


def export_model(model: torch.nn.Module, meta: dict, name: str, out_dir: Path = OUT_DIR) -> tuple[Path, Path]:
    """Write ``name.bin`` and ``name.json`` to ``out_dir``; return their paths.

    ``meta`` holds ``config`` (make_model's keyword arguments, vocabulary sizes
    included), ``source_tokens`` and ``target_tokens`` (index = id), ``pad_id``,
    ``start_id``, ``end_id``, ``max_source_len``, ``max_new_tokens``, ``examples`` and
    anything else the page shows.
    """
    missing = {
        "config",
        "source_tokens",
        "target_tokens",
        "pad_id",
        "start_id",
        "end_id",
        "max_source_len",
        "max_new_tokens",
        "examples",
    } - set(meta)
    if missing:
        raise ValueError(f"meta for {name!r} lacks {sorted(missing)}")
    entries, data = tensor_table(model)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{name}.bin would be {len(data):,} bytes; the playground's limit is {MAX_BYTES:,}")
    return write_files(out_dir, name, meta, entries, data)


def write_files(
    out_dir: Path,
    name: str,
    meta: dict,
    entries: list,
    data: bytes,
    *,
    weights_note: dict | None = None,
    compact: bool = False,
) -> tuple[Path, Path]:
    """Write ``name.bin`` (``data``) and ``name.json`` (``meta``, the file's size and
    sha256 with ``weights_note``, the tensor ``entries``); return their paths.
    ``compact`` writes the JSON without indentation (for a file the page downloads)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    bin_path, json_path = out_dir / f"{name}.bin", out_dir / f"{name}.json"
    bin_path.write_bytes(data)
    document = {
        "format": FORMAT,
        "name": name,
        **meta,
        "weights": {
            "file": bin_path.name,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            **(weights_note or {}),
        },
        "tensors": entries,
    }
    layout = {"separators": (",", ":")} if compact else {"indent": 1}
    json_path.write_text(json.dumps(document, ensure_ascii=False, **layout) + "\n", encoding="utf-8")
    return json_path, bin_path


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A matrix (rows, cols) as int8 and one float32 scale per row: row ~ q * scale.

    The scale maps the row's largest magnitude to 127 (symmetric, no zero point), so
    each weight is off by at most half a step, scale / 2.
    """
    weight = weight.detach().cpu().to(torch.float32)
    scales = weight.abs().amax(dim=1) / 127  # (rows,)
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))  # a zero row
    q = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scales


def dequantize_rows(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """float32 q * scale, row by row: the weights the page computes with."""
    return q.to(torch.float32) * scales[:, None]


def quantized_state(model: torch.nn.Module) -> dict:
    """The state dict as the 8-bit file holds it: every matrix quantized and back."""
    return {
        name: dequantize_rows(*quantize_rows(value)) if value.dim() == 2
        else value.detach().cpu().to(torch.float32).clone()
        for name, value in model.state_dict().items()
    }  # fmt: skip


def export_quantized(
    model: torch.nn.Module,
    meta: dict,
    name: str,
    out_dir: Path = OUT_DIR,
    max_bytes: int = 4_000_000,
) -> tuple[Path, Path]:
    """As ``export_model``, with every matrix in 8 bits (``quantize_rows``).

    The file holds the float32 tensors (vectors, then each matrix's scales) and then
    the int8 matrices. A tensor's ``offset`` counts elements of its ``dtype`` from the
    start of the file; an int8 matrix's ``scales`` is the float32 offset of its scales.
    """
    floats, entries, matrices, float_count = [], [], [], 0
    for tensor_name, value in model.state_dict().items():
        value = value.detach().cpu().to(torch.float32)
        if value.dim() == 2:
            matrices.append((tensor_name, value))
            continue
        floats.append(value.contiguous().numpy().astype("<f4").tobytes())
        entries.append({"name": tensor_name, "shape": list(value.shape), "dtype": "float32", "offset": float_count})
        float_count += value.numel()
    quantized = []
    for tensor_name, value in matrices:
        q, scales = quantize_rows(value)
        floats.append(scales.numpy().astype("<f4").tobytes())
        quantized.append((tensor_name, list(value.shape), q, float_count))
        float_count += scales.numel()
    integers, byte_offset = [], 4 * float_count
    for tensor_name, shape, q, scales_offset in quantized:
        integers.append(q.contiguous().numpy().tobytes())
        entries.append(
            {"name": tensor_name, "shape": shape, "dtype": "int8", "offset": byte_offset, "scales": scales_offset}
        )
        byte_offset += q.numel()
    data = b"".join(floats + integers)
    if len(data) > max_bytes:
        raise ValueError(f"{name}.bin would be {len(data):,} bytes; the limit is {max_bytes:,}")
    return write_files(out_dir, name, meta, entries, data, weights_note={"quantized": "int8 rows"}, compact=True)


def read_state(meta: dict, data: bytes) -> dict:
    """An exported file's state dict, float32 (8-bit matrices dequantized)."""
    floats = torch.frombuffer(bytearray(data[: len(data) // 4 * 4]), dtype=torch.float32)
    raw = torch.frombuffer(bytearray(data), dtype=torch.int8)
    state = {}
    for entry in meta["tensors"]:
        shape, start = entry["shape"], entry["offset"]
        size = int(torch.Size(shape).numel())
        if entry.get("dtype", "float32") == "float32":
            state[entry["name"]] = floats[start : start + size].view(shape).clone()
        else:
            q = raw[start : start + size].view(shape)
            scales = floats[entry["scales"] : entry["scales"] + shape[0]]
            state[entry["name"]] = dequantize_rows(q, scales)
    return state


def load_model(json_path: Path) -> tuple[torch.nn.Module, dict]:
    """The package's model (eval mode, CPU) with the file's weights; its metadata."""
    meta = json.loads(Path(json_path).read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT:
        raise ValueError(f"{json_path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    data = (Path(json_path).parent / meta["weights"]["file"]).read_bytes()
    if len(data) != meta["weights"]["bytes"] or hashlib.sha256(data).hexdigest() != meta["weights"]["sha256"]:
        raise ValueError(f"{meta['weights']['file']} does not match {json_path} (size or sha256)")
    state = read_state(meta, data)
    model = make_model(**meta["config"])
    model.load_state_dict(state, strict=True)
    return model.eval(), meta
