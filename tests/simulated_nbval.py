"""nbval on a simulated device and another CPU's kernels: the test command's one run of each chapter.

With ``BOOK_NBVAL_KERNELS`` set to a kernel path of ``tools/notebooks.py`` (``KERNEL_PATHS``:
``default``, ``avx2`` or ``native``; scripts/test.sh sets ``avx2``), every notebook that nbval
runs starts its kernel

- if it picks a device (its code asks ``torch.cuda.is_available()``, as every chapter's device cell
  does; the intro does not), on a simulated GPU (tests/device_sim.py): CUDA, or MPS where it uses float64
  (``test_devices.device_of``), so that the chapter's device cell picks it and anything the real
  device refuses (mixing devices, ``.numpy()`` of a device tensor, float64 on MPS...) fails the cell;
- with that kernel path's environment, so the stored outputs, made on the author's CPU, are compared
  with another CPU's numerics.

After the last cell of a notebook that picks a device, its kernel must have run more than ``MINIMUM_OPERATIONS`` torch calls
on the simulated device (else the device cell did not pick it, and the run proved nothing).

Without ``BOOK_NBVAL_KERNELS`` nbval runs as it does for a reader: this CPU, no simulation.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest

VARIABLE = "BOOK_NBVAL_KERNELS"
MINIMUM_OPERATIONS = 100
DEVICE_SIM = Path(__file__).with_name("device_sim.py")

# Run by every IPython kernel started with this plugin's IPYTHONDIR, before any cell; it leaves no
# name in the chapter's namespace (a chapter that forgot an import must still fail).
STARTUP = """\
def _simulate_device():
    import importlib.util, os, sys
    device = os.environ.get("BOOK_SIMULATED_DEVICE")
    if device:
        spec = importlib.util.spec_from_file_location("device_sim", {path!r})
        module = importlib.util.module_from_spec(spec)
        sys.modules["device_sim"] = module
        spec.loader.exec_module(module)
        module.install(device)
_simulate_device()
del _simulate_device
"""
COUNT = "print(__import__('sys').modules['device_sim'].installed().operations)"


@contextlib.contextmanager
def environment(values: dict[str, str]):
    """``os.environ`` with ``values`` for the duration of the block (a kernel started inside
    inherits them; nothing else in this process keeps them)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def kernel_output(kernel, code: str) -> str:
    """What ``code`` prints when run in nbval's kernel (a ``RunningKernel``)."""
    printed = []

    def keep(message):
        if message["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    kernel.kc.execute_interactive(code, output_hook=keep, timeout=60)
    return "".join(printed)


def register(config) -> None:
    """Register the plugin if ``BOOK_NBVAL_KERNELS`` is set and nbval runs (tests/conftest.py)."""
    kernels = os.environ.get(VARIABLE)
    if kernels and config.getoption("nbval", default=False):
        config.pluginmanager.register(SimulatedDevices(kernels), "simulated-devices")


class SimulatedDevices:
    """The pytest plugin (``register``)."""

    def __init__(self, kernels: str):
        from notebooks import KERNEL_PATHS

        if kernels not in KERNEL_PATHS:
            raise ValueError(f"{VARIABLE}={kernels!r}: expected one of {sorted(KERNEL_PATHS)}")
        self.kernel_environment = KERNEL_PATHS[kernels]
        self.folder = tempfile.TemporaryDirectory(prefix="book-ipython-")
        startup = Path(self.folder.name) / "profile_default" / "startup"
        startup.mkdir(parents=True)
        (startup / "00-simulated-device.py").write_text(STARTUP.format(path=str(DEVICE_SIM)), encoding="utf-8")

    def pytest_unconfigure(self):
        self.folder.cleanup()

    @staticmethod
    def notebook_of(item):
        from nbval.plugin import IPyNbCell

        return item.parent if isinstance(item, IPyNbCell) else None

    @staticmethod
    def device_for(notebook) -> str | None:
        """The simulated device a notebook runs on; None if it picks no device."""
        from test_devices import device_of

        path = Path(str(notebook.fspath))
        picks = "torch.cuda.is_available()" in path.read_text(encoding="utf-8")
        return device_of(path) if picks else None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        notebook = self.notebook_of(item)
        if notebook is None or notebook.kernel is not None:
            return (yield)
        # the notebook's first cell: nbval starts its kernel now, with these variables
        device = self.device_for(notebook)
        values = {
            "IPYTHONDIR": self.folder.name,
            **self.kernel_environment,
            **({"BOOK_SIMULATED_DEVICE": device} if device else {}),
        }
        with environment(values):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        notebook = self.notebook_of(item)
        last = notebook is not None and (nextitem is None or nextitem.parent is not notebook)
        if not last or notebook.kernel is None or not notebook.kernel.is_alive():
            return (yield)
        device = self.device_for(notebook)
        if device is None:
            return (yield)
        # counted while the kernel lives; said after nbval's own teardown has stopped it
        printed = kernel_output(notebook.kernel, COUNT).split()
        operations = int(printed[-1]) if printed else 0
        result = yield
        if operations <= MINIMUM_OPERATIONS:
            pytest.fail(
                f"{notebook.fspath.basename} ran {operations} torch operations on the "
                f"simulated {device} (expected more than {MINIMUM_OPERATIONS}): its device "
                "cell did not pick the device",
                pytrace=False,
            )
        return result
