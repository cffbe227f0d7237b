"""The book's notebook toolkit: read the chapters, run them, compare their outputs, check generated files.

One module for the tools and the tests alike. The tools import it as a sibling (``import notebooks``:
Python puts a script's folder first on its path, so ``python tools/NAME.py`` finds it); the tests find
it through pytest's ``pythonpath`` setting (pyproject.toml). Nothing edits ``sys.path``.

Reading (the notebook file's JSON, as committed):
    ``chapters()``, ``cells(path, kind=None)``, ``sources(path, kind)``, ``source(cell)``,
    ``tags(cell)``, ``printed(cell)``, ``output_text(cell)``.
    ``exercises(path)``: each exercise's stub and solution, as the chapter writes them.
Comparing (as nbval does, after the rules of tests/nbval_sanitize.cfg):
    ``sanitizers()``, ``sanitize(text, rules)``, ``compared_text(cell, rules)``, ``is_compared(cell)``,
    ``first_difference(expected, got)``, ``first_line(source)``.
Running:
    ``run_plain(path, rules, seed=None)``: the code cells in one namespace with plain ``exec``
    (no Jupyter: tools/run_chapters_plain.py, for a machine with a GPU but no kernel);
    ``execute(path, timeout)``: in a fresh Jupyter kernel (nbclient), saved in place with its outputs;
    ``Kernel``: one Jupyter kernel that runs setup code and chapters in turn (tests/test_devices.py).
    ``KERNEL_PATHS``: the environment that gives this CPU another CPU's numerics.
Checking generated files (every tool's ``--check``):
    ``regenerate_and_compare(write, committed, compare)``: write into a temporary folder, compare
    (``differing_files``; ``json_differs`` for a record compared without its timings);
    ``check_outcome(different, committed, recorded=...)``: say what differs (or that nothing does), and
    whether the files were made in another environment (``environment()``: the torch build, CPU kernels,
    threads that a seeded CPU run's bits depend on); the exit status.
    ``train_or_check(check, out, train, summary)`` and ``training_parser(doc, arms, seed_help)``: a training
    tool's two modes and its command line. ``WEIGHTS_DIR``, ``DATA_DIR``: where its files go.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOK = REPO_ROOT / "book"
TOOLS = REPO_ROOT / "tools"
TESTS = REPO_ROOT / "tests"
# Where the package's shipped files live in the source tree: what the training tools write and check
# (the package reads them through transformer_book.shipped, wherever it is installed).
PACKAGE_DIR = REPO_ROOT / "src" / "transformer_book"
WEIGHTS_DIR = PACKAGE_DIR / "weights"
DATA_DIR = PACKAGE_DIR / "data"
SANITIZE_FILE = TESTS / "nbval_sanitize.cfg"
IGNORED_TAGS = {"nbval-ignore-output", "nbval-skip"}  # cells run, not compared

# The numerics of other x86 CPUs, reproduced on this one: PyTorch's own kernels
# (ATEN_CPU_CAPABILITY), MKL's matrix products (MKL_ENABLE_INSTRUCTIONS) and oneDNN's each pick
# their code for the CPU they find. Set before torch loads. "native" is this CPU's own choice.
KERNEL_PATHS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}

SEED_LINE = re.compile(r"^seed = 0\b", flags=re.MULTILINE)  # a chapter's seed cell


# --- Reading ------------------------------------------------------------------------------------
def chapters() -> list[Path]:
    """The chapters, book/NN_name.ipynb, in order."""
    return sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))


def cells(path: Path, kind: str | None = None) -> list[dict]:
    """The notebook's cells as stored (JSON dicts); only those of ``kind`` ("code", "markdown")."""
    found = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    return [cell for cell in found if kind is None or cell["cell_type"] == kind]


def joined(text: str | list[str]) -> str:
    """A source or an output's text: the file's JSON gives a list of lines, nbformat a str."""
    return "".join(text) if isinstance(text, list) else text


def source(cell) -> str:
    return joined(cell["source"])


def sources(path: Path, kind: str) -> list[str]:
    """The source of each cell of ``kind``, in order."""
    return [source(cell) for cell in cells(path, kind)]


def tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def printed(cell) -> str:
    """What a code cell wrote to its streams (stdout and stderr), as stored."""
    return "".join(joined(output["text"]) for output in cell.get("outputs", []) if output["output_type"] == "stream")


def output_text(cell) -> str:
    """Every text a code cell shows: its streams, and the plain, markdown and HTML of its results."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(joined(output["text"]))
        for kind in ("text/plain", "text/markdown", "text/html"):
            if kind in output.get("data", {}):
                parts.append(joined(output["data"][kind]))
    return "\n".join(parts)


def definitions(cell_source: str) -> dict[str, str]:
    """A cell's imports and definitions, as one source text, under each function name it defines.

    The cell's other statements (the calls that check a solution, prints) are left out."""
    lines = cell_source.splitlines()
    kept = [
        node
        for node in ast.parse(cell_source).body
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))
    ]
    starts = [
        min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])]) for node in kept
    ]
    text = "\n\n".join("\n".join(lines[start - 1 : node.end_lineno]) for start, node in zip(starts, kept))
    return {node.name: text + "\n" for node in kept if isinstance(node, ast.FunctionDef)}


def exercises(path: Path) -> dict[str, tuple[str, str | None]]:
    """The chapter's exercises, by function name: (stub, solution).

    The stub is a cell tagged `exercise`; the solution, the imports and definitions of the cell tagged
    `solution` that defines the same function (None if none does)."""
    code = cells(path, "code")
    solutions: dict[str, str] = {}
    for cell in code:
        if "solution" in tags(cell):
            solutions.update(definitions(source(cell)))
    return {
        name: (source(cell), solutions.get(name))
        for cell in code
        if "exercise" in tags(cell)
        for name in list(definitions(source(cell)))[:1]
    }


# --- Comparing ----------------------------------------------------------------------------------
Rules = list[tuple[re.Pattern, str]]


def sanitizers() -> Rules:
    """The regexes of tests/nbval_sanitize.cfg, applied to both sides as nbval does."""
    text = SANITIZE_FILE.read_text(encoding="utf-8")
    regexes = re.findall(r"^regex:\s*(.*)$", text, flags=re.MULTILINE)
    replaces = re.findall(r"^replace:\s*(.*)$", text, flags=re.MULTILINE)
    return [(re.compile(regex), replace) for regex, replace in zip(regexes, replaces)]


def sanitize(text: str, rules: Rules) -> str:
    for regex, replace in rules:
        text = regex.sub(replace, text)
    return text


def compared_text(cell, rules: Rules, charts: bool = False) -> str:
    """What a cell printed (stdout) and returned (text/plain), sanitized; with ``charts``, also
    the HTML it displayed (an Altair chart's spec and data), which nbval compares too."""
    parts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream" and output["name"] == "stdout":
            parts.append(joined(output["text"]))
        elif output["output_type"] in ("execute_result", "display_data"):
            data = output["data"]
            if output["output_type"] == "execute_result":
                parts.append(joined(data.get("text/plain", "")))
            if charts and "text/html" in data:
                parts.append("\n[text/html]\n" + joined(data["text/html"]))
    return sanitize("".join(parts), rules)


def is_compared(cell) -> bool:
    """Whether the tests compare the cell's output (it is not tagged to be ignored)."""
    return not tags(cell) & IGNORED_TAGS


def first_difference(expected: str, got: str) -> str:
    for number, (want, have) in enumerate(zip(expected.splitlines(), got.splitlines()), 1):
        if want != have:
            column = next((i for i, (a, b) in enumerate(zip(want, have)) if a != b), min(len(want), len(have)))
            start = max(0, column - 60)  # a chart's data is one long line: show where it differs
            return (
                f"line {number}, column {column}: expected {want[start : column + 60]!r}, "
                f"got {have[start : column + 60]!r}"
            )
    return f"expected {len(expected.splitlines())} lines, got {len(got.splitlines())}"


def first_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:80] if lines else ""


def where(index: int, cell_source: str) -> str:
    """How a report names a cell."""
    return f"cell {index} ({first_line(cell_source)!r})"


# --- Running: plain exec, no Jupyter ------------------------------------------------------------
def run_cell(cell_source: str, namespace: dict) -> str:
    """Execute ``cell_source`` as a notebook cell: stdout, then the repr of a last expression."""
    tree = ast.parse(cell_source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None and cell_source.rstrip().endswith(";"):
        tree.body.append(last)  # a trailing semicolon hides the value, as in Jupyter
        last = None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(tree, "<cell>", "exec"), namespace)  # noqa: S102 - running the chapter is the point
        value = None
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
    text = out.getvalue()
    if value is not None and not hasattr(value, "_ipython_display_"):
        text += repr(value)  # what Jupyter stores as text/plain
    return text


def run_plain(path: Path, rules: Rules, seed: int | None = None) -> dict:
    """Run a chapter's code cells in order in one fresh namespace (its folder the working directory).

    The report: ``device`` (the chapter's ``device``), ``errors`` (the exception that stopped the
    chapter), ``differences`` (compared outputs other than the stored ones, stripped), ``outputs``
    (every code cell's, sanitized, by index) and ``seconds``. ``seed`` replaces the seed cell's 0.
    """
    import torch

    namespace = {"__name__": "__main__", "display": lambda *objects, **options: None}
    errors, differences, outputs, started = [], [], {}, time.perf_counter()
    cwd = os.getcwd()
    os.chdir(path.parent)
    torch.set_default_dtype(torch.float32)
    with contextlib.suppress(ImportError):
        import pandas  # a notebook kernel is no terminal: pandas wraps wide frames at 80 columns

        pandas.set_option("display.max_columns", 20)
        pandas.set_option("display.width", 80)
    try:
        for index, cell in enumerate(cells(path)):
            if cell["cell_type"] != "code":
                continue
            text = source(cell)
            if seed is not None:
                text = SEED_LINE.sub(f"seed = {seed}", text)
            try:
                got = run_cell(text, namespace)
            except BaseException as failure:  # noqa: BLE001 - report and stop the chapter
                errors.append(
                    f"{where(index, text)} raised {type(failure).__name__}: {failure}\n"
                    + "".join(traceback.format_exc(limit=-3))
                )
                break
            got = outputs[str(index)] = sanitize(got, rules)
            if not is_compared(cell):
                continue
            expected = compared_text(cell, rules)
            if got.strip() != expected.strip():
                differences.append(f"{where(index, text)}: {first_difference(expected.strip(), got.strip())}")
    finally:
        os.chdir(cwd)
    device = str(namespace.get("device", "?"))
    return {
        "device": device,
        "errors": errors,
        "differences": differences,
        "outputs": outputs,
        "seconds": round(time.perf_counter() - started, 1),
    }


# --- Running: Jupyter kernels (nbclient) --------------------------------------------------------
def execute(path: Path, timeout: int, save: bool = True) -> float:
    """Execute a notebook top to bottom in a fresh kernel (saved in place unless not ``save``); seconds."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    client = NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    elapsed = time.perf_counter() - started
    if save:
        nbformat.write(notebook, path)
    return elapsed


def with_pythonpath(*folders: Path, environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environment`` (default: this process's) with ``folders`` first on PYTHONPATH."""
    environment = dict(os.environ if environment is None else environment)
    paths = [str(folder) for folder in folders]
    if environment.get("PYTHONPATH"):
        paths.append(environment["PYTHONPATH"])
    environment["PYTHONPATH"] = os.pathsep.join(paths)
    return environment


class Kernel:
    """One Jupyter kernel, started in ``folder``, that runs code and chapters in turn.

    ``with Kernel.started(BOOK, timeout, env) as kernel:`` then ``kernel.run(code)`` (its stdout) and
    ``kernel.run_chapter(path, rules)`` (what differed from the stored outputs, then the exception
    that stopped the chapter). ``env`` is the kernel's environment (default: this process's).
    """

    def __init__(self, client):
        self.client = client

    @classmethod
    @contextlib.contextmanager
    def started(cls, folder: Path, timeout: int, env: Mapping[str, str] | None = None) -> Iterator[Kernel]:
        import nbformat
        from nbclient import NotebookClient

        client = NotebookClient(
            nbformat.v4.new_notebook(),
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(folder)}},
        )
        options = {} if env is None else {"env": dict(env)}
        with client.setup_kernel(**options):
            yield cls(client)

    def run(self, code: str) -> str:
        """Run ``code`` as a cell of its own; what it wrote to its streams."""
        import nbformat

        cell = nbformat.v4.new_code_cell(code)
        chapter, self.client.nb = self.client.nb, nbformat.v4.new_notebook(cells=[cell])
        try:
            self.client.execute_cell(cell, 0)
        finally:
            self.client.nb = chapter
        return "".join(output.get("text", "") for output in cell.outputs if output["output_type"] == "stream")

    def run_chapter(self, path: Path, rules: Rules) -> list[str]:
        """Run a chapter's code cells in this kernel's namespace; the outputs that differ from the
        stored ones (compared cells only), then the exception that stopped the chapter, if any."""
        import nbformat
        from nbclient.exceptions import CellExecutionError

        notebook = nbformat.read(path, as_version=4)
        self.client.nb = notebook
        errors = []
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            expected = compared_text(cell, rules, charts=True)  # as nbval compares
            try:
                self.client.execute_cell(cell, index)
            except CellExecutionError as failure:
                errors.append(f"{where(index, cell.source)} raised {failure.ename}: {failure.evalue}")
                break  # the cells after it would fail for want of its results
            if not is_compared(cell):
                continue
            got = compared_text(cell, rules, charts=True)
            if got != expected:
                errors.append(
                    f"{where(index, cell.source)} printed other output than on the CPU: "
                    f"{first_difference(expected, got)}"
                )
        return errors


# --- Checking generated files (--check) ---------------------------------------------------------
Compare = Callable[[Path, Path], list[str]]  # (new file, committed file) -> what differs


def same_bytes(new: Path, old: Path) -> list[str]:
    """The file's name if its bytes differ, else nothing."""
    return [] if new.read_bytes() == old.read_bytes() else [new.name]


def json_differs(new: Path, old: Path, *ignored: tuple[str, ...]) -> bool:
    """Whether two JSON files hold other data, each ``ignored`` key path (e.g. ("settings", "torch"))
    left out of both."""
    documents = [json.loads(path.read_text(encoding="utf-8")) for path in (new, old)]
    for document in documents:
        for *parents, key in ignored:
            for parent in parents:
                document = document.get(parent, {})
            document.pop(key, None)
    return documents[0] != documents[1]


def saved_differs(new: Path, old: Path, *ignored: str) -> bool:
    """Whether two ``torch.save`` files of a dict hold other data (tensors compared exactly), each
    ``ignored`` top-level key left out of both."""
    import torch

    def same(a, b) -> bool:
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            return (
                isinstance(a, torch.Tensor)
                and isinstance(b, torch.Tensor)
                and a.dtype == b.dtype
                and a.shape == b.shape
                and torch.equal(a, b)
            )
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
        return a == b

    documents = [torch.load(path, map_location="cpu", weights_only=True) for path in (new, old)]
    for document in documents:
        for key in ignored:
            document.pop(key, None)
    return not same(*documents)


def environment() -> dict:
    """What a seeded training run on the CPU gives other bits under, the code and seed aside: the torch
    build, the CPU kernels it picks (its capability, MKL's version, any KERNEL_PATHS variable set) and
    its thread count. Record it beside trained weights; ``check_outcome`` names it when they differ."""
    import torch

    mkl = re.search(r"Math Kernel Library Version (.+?)(?: for |$)", torch.__config__.show(), flags=re.MULTILINE)
    variables = sorted({name for path in KERNEL_PATHS.values() for name in path})
    return {
        "torch": str(torch.__version__),  # a str subclass weights_only loading refuses
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl": mkl.group(1) if mkl else None,
        "threads": torch.get_num_threads(),
        "kernel_variables": {name: os.environ[name] for name in variables if name in os.environ},
    }


def environment_difference(recorded: Mapping | None, here: Mapping | None = None) -> str | None:
    """A sentence naming how the ``recorded`` environment differs from ``here`` (default: this one's,
    ``environment()``), or None if it is the same."""
    here = environment() if here is None else here
    if recorded is None:
        return f"the committed files record no environment; this one is {json.dumps(here)}"
    changed = {
        key: (recorded.get(key), here.get(key))
        for key in sorted(set(recorded) | set(here))
        if recorded.get(key) != here.get(key)
    }
    if not changed:
        return None
    return (
        "the committed files were made in another environment (a seeded CPU run gives the same "
        "bits only with the same torch build, kernels and threads): "
        + "; ".join(f"{key}: {old!r} there, {new!r} here" for key, (old, new) in changed.items())
    )


def differing_files(
    scratch: Path,
    committed: Path | Mapping[str, Path],
    compare: Mapping[str, Compare] | None = None,
    written: Iterable[Path] | None = None,
) -> list[str]:
    """What differs between each file in ``scratch`` and the committed one of its name.

    ``committed`` is a folder, or a {name: path}. A file missing there is named; others are compared
    byte for byte, or with ``compare[name]`` (which lists what differs, e.g. ignoring timings).
    The files are taken in the order of ``written`` if given, else by name.
    """
    found = []
    files = sorted(path for path in scratch.iterdir() if path.is_file()) if written is None else written
    for new in files:
        old = committed / new.name if isinstance(committed, Path) else committed.get(new.name)
        if old is None or not old.exists():
            found.append(new.name)
        else:
            found += (compare or {}).get(new.name, same_bytes)(new, old)
    return found


def regenerate_and_compare(
    write: Callable[[Path], object], committed: Path | Mapping[str, Path], compare: Mapping[str, Compare] | None = None
) -> list[str]:
    """``write(folder)`` into a temporary folder, then ``differing_files`` against ``committed``
    (in the order of the paths ``write`` returns, if it returns a list or tuple of them)."""
    with tempfile.TemporaryDirectory() as folder:
        written = write(Path(folder))
        paths = (
            written
            if written and isinstance(written, list | tuple) and all(isinstance(path, Path) for path in written)
            else None
        )
        return differing_files(Path(folder), committed, compare, paths)


def training_parser(doc: str, arms: Iterable[str] = (), seed_help: str | None = None) -> argparse.ArgumentParser:
    """The command line of a tool that trains shipped files (``train_or_check``'s two modes): ``--check``,
    ``--steps`` (a toy budget) and ``--out``; ``--arm`` when the tool trains one of several ``arms``,
    ``--seed`` when it takes a seed (``seed_help`` says what another seed writes). The description is
    the first paragraph of the tool's ``doc``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if arms:
        parser.add_argument("--arm", required=True, choices=sorted(arms))
    parser.add_argument("--check", action="store_true", help="train again and compare")
    parser.add_argument("--steps", type=int, default=None, help="a toy budget")
    if seed_help is not None:
        parser.add_argument("--seed", type=int, default=0, help=seed_help)
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    return parser


def train_or_check(check: bool, out: Path, train: Callable[[Path], dict], summary: Callable[[dict], str]) -> int:
    """A training tool's two modes, its exit status: ``train(out)`` and print ``summary`` of what it
    returned; or, with ``check``, ``train`` again into a temporary folder, print the retrained run's
    ``summary`` and compare every file it wrote with ``out``'s (``check_outcome``)."""
    if not check:
        print(summary(train(out)))
        print(f"wrote {out}")
        return 0
    results = []
    different = regenerate_and_compare(lambda folder: results.append(train(folder)), out)
    print("retrained: " + summary(results[0]))
    return check_outcome(different, out)


def check_outcome(
    different: list[str], committed: object, same: str = "identical", recorded: Mapping | None = None
) -> int:
    """Print what differs from ``committed`` (to stderr) or ``same``; the exit status of ``--check``.
    A difference also says how the environment the committed files ``recorded`` (``environment()``'s
    dict; None: they record none) differs from this one."""
    if different:
        print(f"differs from {committed}: {', '.join(different)}", file=sys.stderr)
        if why := environment_difference(recorded):
            print(why, file=sys.stderr)
        return 1
    print(same)
    return 0
