"""The machinery shared by every chapter's exercise checkers.

An :class:`Exercise` knows how to make a few small, seeded test cases (on the CPU), how the companion
package answers them (the reference), and the typical mistakes: for each, a hint and the mistaken code
itself (a function that returns what the mistake returns, or raises what it raises). The notebook is
the one source of each exercise's stub and solution; a chapter module holds only its exercises, each
declared once by :func:`exercise` on its reference: a function named like the reader's stub, whose
docstring says what the exercise asks.
``check(function)`` finds the exercise named like the reader's function, runs the function on every case
and prints exactly one line:

* ``Not attempted yet: ...`` when the function raises ``NotImplementedError`` or returns ``None``
  (the untouched stub), so an executed notebook stays free of errors;
* ``Correct: ...`` when every case agrees with the package;
* ``Not quite: <hint>`` when the answer (or the error raised) matches a known mistake, or, failing that,
  a description of the first difference (shape, NaN, or the first differing entry).

Devices: the inputs are made on the CPU (float32, seeded). Pass ``device="cuda"`` (or ``"mps"``, or the
notebook's ``device``) to ``check`` to move the tensor and module inputs there before calling the
reader's function; the reader's output is always moved to the CPU before it is compared. So a function
that builds its own tensors on ``device`` can be checked with ``device=device``.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

# every chXX.py beside this file, in order
CHAPTERS = tuple(sorted(path.stem for path in Path(__file__).parent.glob("ch[0-9][0-9].py")))
EXERCISES: dict[str, Exercise] = {}  # every exercise of the chapter modules imported so far, by name

NOT_ATTEMPTED = "Not attempted yet"
CORRECT = "Correct"
WRONG = "Not quite"


class CheckResult:
    """What a check found: true if the answer is correct.

    Displays nothing in a notebook (the check has printed its line already), so ``check(f)`` as a
    cell's last line shows one line only."""

    def __init__(self, status: str, message: str):
        self.status = status
        self.message = message

    @property
    def passed(self) -> bool:
        return self.status == CORRECT

    @property
    def attempted(self) -> bool:
        return self.status != NOT_ATTEMPTED

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"CheckResult(status={self.status!r}, message={self.message!r})"

    def _ipython_display_(self) -> None:  # the check already printed its one line
        pass


@dataclass
class Case:
    """One call of the reader's function: positional arguments, and a short description for messages."""

    args: tuple
    label: str
    kwargs: dict = field(default_factory=dict)


@dataclass
class Mistake:
    """A typical wrong answer: the hint to print, and the mistaken code.

    ``compute`` takes the exercise's arguments and returns what code with that mistake returns (None
    where the mistake does not apply), or raises what it raises: a reader's function that raises the
    same error (type and first line) on the same case gets this hint."""

    hint: str
    compute: Callable


@dataclass
class Exercise:
    """Everything a checker needs about one exercise (see the module docstring)."""

    name: str
    task: str  # what the reader is asked to do (the reference's docstring, or exercise(task=...))
    cases: Callable[[], Sequence[Case]]
    reference: Callable
    mistakes: Sequence[Mistake] = ()
    atol: float = 1e-5
    rtol: float = 1e-4
    normalize: Callable | None = None  # applied to the reader's output before comparing
    describe: Callable | None = None  # (got, expected, case) -> specific message, or None
    success: str = ""
    # turns a function with the reader's arguments into one the cases call (the reader's function,
    # the reference and the mistakes alike), e.g. one rate per step into the rates of a list of steps
    adapt: Callable = lambda function: function

    chapter: str = ""  # the module that declares it, e.g. "book_exercises.ch04"

    def __post_init__(self):
        known = EXERCISES.get(self.name)
        if known is not None and known.chapter != self.chapter:
            raise ValueError(
                f"two exercises are called {self.name!r}: in {known.chapter} and in "
                f"{self.chapter or 'an unnamed module'}; give one another name"
            )
        EXERCISES[self.name] = self


def exercise(
    cases: Callable[[], Sequence[Case]], mistakes: Sequence[Mistake] = (), *, task: str | None = None, **options
) -> Callable[[Callable], Callable]:
    """Declare the function it decorates as the reference answer of the exercise of its name.

    The exercise is called like the function (the name of the reader's stub) and asks what the
    function's docstring says (or ``task``, for a function of the package used as it is:
    ``exercise(cases, task=...)(padding_mask)``). ``options`` are the other fields of
    :class:`Exercise` (atol, normalize, describe, success...). Returns the function unchanged."""
    chapter = inspect.currentframe().f_back.f_globals.get("__name__", "")

    def declare(reference: Callable) -> Callable:
        asks = task if task is not None else (inspect.getdoc(reference) or "").split("\n\n")[0]
        Exercise(
            name=reference.__name__,
            task=" ".join(asks.split()),
            cases=cases,
            reference=reference,
            mistakes=mistakes,
            chapter=chapter,
            **options,
        )
        return reference

    return declare


def check(function: Callable, device=None, exercise: str | None = None) -> CheckResult:
    """Check the reader's ``function`` against the exercise of its name and print one line.

    ``exercise`` names the exercise when the function has another name. Tensor and module inputs are
    moved to ``device`` (e.g. the notebook's ``device``); the output is compared on the CPU."""
    name = exercise or getattr(function, "__name__", None)
    for chapter in CHAPTERS:  # import the chapters' exercises until the name is found
        if name in EXERCISES:
            break
        importlib.import_module(f"book_exercises.{chapter}")
    if name not in EXERCISES:
        raise ValueError(
            f"no exercise is called {name!r}: keep the name of the stub's function, "
            f"or name the exercise, e.g. check({name}, exercise='sinusoidal_table')"
        )
    return run(EXERCISES[name], function, device)


def to_device(value, device):
    """Move tensors and modules (also inside tuples, lists and dicts) to ``device``; copy modules."""
    if device is None:
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, nn.Module):
        return copy.deepcopy(value).to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(item, device) for item in value)
    if isinstance(value, dict):
        return {key: to_device(item, device) for key, item in value.items()}
    return value


def to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(item) for item in value)
    return value


def same(got, expected, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Tell whether ``got`` and ``expected`` have equal shapes and values.

    True if ``got`` and ``expected`` (tensors, or tuples of tensors) have equal shapes and values
    (NaN equal to NaN; booleans and integers exactly)."""
    if isinstance(expected, (tuple, list)):
        return (
            isinstance(got, (tuple, list))
            and len(got) == len(expected)
            and all(same(g, e, atol, rtol) for g, e in zip(got, expected))
        )
    if not isinstance(got, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return got == expected
    if got.shape != expected.shape:
        return False
    if expected.dtype == torch.bool or not expected.is_floating_point():
        return got.dtype == expected.dtype and torch.equal(got, expected)
    if not got.is_floating_point():
        return False
    return torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=True)


def difference(got, expected, atol: float = 1e-5, rtol: float = 1e-4) -> str:
    """A one-sentence description of how ``got`` differs from ``expected``."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"return {len(expected)} values (a tuple); got {type(got).__name__}"
        for index, (g, e) in enumerate(zip(got, expected)):
            if not same(g, e, atol, rtol):
                return f"returned value {index}: " + difference(g, e, atol, rtol)
        return "the values agree"
    if not isinstance(expected, torch.Tensor):
        return f"expected {expected!r}, got {got!r}"
    if not isinstance(got, torch.Tensor):
        return f"return a tensor; got {type(got).__name__}"
    if got.shape != expected.shape:
        return f"your output has shape {tuple(got.shape)}; expected {tuple(expected.shape)}"
    if expected.dtype == torch.bool and got.dtype != torch.bool:
        return f"return a boolean tensor (True/False); got dtype {got.dtype}"
    if expected.is_floating_point() and not got.is_floating_point():
        return f"return a floating-point tensor; got dtype {got.dtype}"
    if expected.is_floating_point() and torch.isnan(got).any() and not torch.isnan(expected).any():
        where = tuple(torch.nonzero(torch.isnan(got))[0].tolist())
        return f"your output contains NaN (first at index {where}); the expected output has none"
    if expected.dtype == torch.bool or not expected.is_floating_point():
        wrong = got != expected
    else:
        wrong = ~torch.isclose(got.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=True)
    where = tuple(torch.nonzero(wrong)[0].tolist())
    return (
        f"first difference at index {where}: expected {format_value(expected[where])}, got {format_value(got[where])}"
    )


def format_value(value: torch.Tensor) -> str:
    item = value.item()
    if isinstance(item, float):
        return "nan" if math.isnan(item) else f"{item:.4g}"
    return str(item)


def report(status: str, message: str) -> CheckResult:
    print(f"{status}: {message}")
    return CheckResult(status, message)


def run(exercise: Exercise, function: Callable, device=None) -> CheckResult:
    """Check ``function`` against ``exercise`` and print one line (see the module docstring)."""
    function = exercise.adapt(function)
    with torch.random.fork_rng(devices=[]):  # our seeds must not disturb the notebook's random state
        cases = exercise.cases()
    for number, case in enumerate(cases):
        try:
            with torch.no_grad():
                expected = exercise.adapt(exercise.reference)(*case.args, **case.kwargs)
        except Exception as error:  # noqa: BLE001 (a bug in the checker itself: say so, do not blame the reader)
            return report(WRONG, f"the checker failed on {case.label} ({error}); please report it")
        try:
            with torch.no_grad():
                got = function(*to_device(case.args, device), **to_device(case.kwargs, device))
        except NotImplementedError:
            return report(
                NOT_ATTEMPTED,
                f"{exercise.name} (replace `raise NotImplementedError` with your code, then run this cell again).",
            )
        except Exception as error:  # noqa: BLE001 (whatever the reader's code raises is reported)
            mistake = _raising_mistake(exercise, case, error)
            if mistake is not None:
                return report(WRONG, mistake.hint)
            return report(WRONG, f"your function raised {type(error).__name__} on {case.label}: {first_line(error)}")
        if got is None:
            if number == 0:
                return report(
                    NOT_ATTEMPTED,
                    f"{exercise.name} returns None (write its body and return the result, then run this cell again).",
                )
            return report(WRONG, f"your function returned None on {case.label}")
        got = to_cpu(got)
        if exercise.normalize is not None:
            got = exercise.normalize(got)
        if same(got, expected, exercise.atol, exercise.rtol):
            continue
        mistake = _matching_mistake(exercise, function, device, cases, number, got)
        if mistake is not None:
            return report(WRONG, mistake.hint)
        specific = exercise.describe(got, expected, case) if exercise.describe is not None else None
        return report(WRONG, specific or f"on {case.label}, {difference(got, expected, exercise.atol, exercise.rtol)}")
    success = exercise.success or "matches the companion package"
    return report(CORRECT, f"{exercise.name} {success} on all {len(cases)} test cases.")


def first_line(error: Exception) -> str:
    """The first line of an error's message (what the reader's error and a mistake's are compared by)."""
    return str(error).strip().splitlines()[0] if str(error).strip() else ""


def _raising_mistake(exercise: Exercise, case: Case, error: Exception) -> Mistake | None:
    """The first mistake that raises the reader's error (same type, same first line) on ``case``."""
    for mistake in exercise.mistakes:
        try:
            with torch.no_grad():
                exercise.adapt(mistake.compute)(*case.args, **case.kwargs)
        except Exception as raised:  # noqa: BLE001 (the mistake's own error, compared with the reader's)
            if type(raised) is type(error) and first_line(raised) == first_line(error):
                return mistake
    return None


def _outputs(exercise: Exercise, function: Callable, device, cases: Sequence[Case]) -> list:
    """The reader's output for every case (None where it fails), normalized and on the CPU."""
    outputs = []
    for case in cases:
        try:
            with torch.no_grad():
                got = to_cpu(function(*to_device(case.args, device), **to_device(case.kwargs, device)))
            outputs.append(exercise.normalize(got) if exercise.normalize is not None else got)
        except Exception:  # noqa: BLE001 (a case the reader's code fails on has no output)
            outputs.append(None)
    return outputs


def _matching_mistake(
    exercise: Exercise, function: Callable, device, cases: Sequence[Case], failing: int, got
) -> Mistake | None:
    """The first mistake that reproduces the reader's output on the failing case and on every other
    case where both can be computed (so that two mistakes alike on one case are told apart)."""
    outputs = None
    for mistake in exercise.mistakes:
        try:
            with torch.no_grad():
                wrong = exercise.adapt(mistake.compute)(*cases[failing].args, **cases[failing].kwargs)
        except Exception:  # noqa: BLE001, S112 (a mistake that cannot run on this case does not match)
            continue
        if wrong is None or not same(got, wrong, exercise.atol, exercise.rtol):
            continue
        outputs = outputs if outputs is not None else _outputs(exercise, function, device, cases)
        agrees = True
        for case, output in zip(cases, outputs):
            try:
                with torch.no_grad():
                    wrong = exercise.adapt(mistake.compute)(*case.args, **case.kwargs)
            except Exception:  # noqa: BLE001, S112 (a case the mistake cannot run on says nothing)
                continue
            if output is not None and wrong is not None and not same(output, wrong, exercise.atol, exercise.rtol):
                agrees = False
                break
        if agrees:
            return mistake
    return None


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=seeded(seed)) * scale


def load_solution(source: str, name: str) -> Callable:
    """Execute a solution's source text and return the function called ``name`` (used by the tests)."""
    namespace: dict = {}
    exec(compile(source, f"<solution {name}>", "exec"), namespace)  # noqa: S102 (the book's own solutions)
    return namespace[name]
