"""The device simulation itself (tests/device_sim.py): it refuses what a real GPU or Apple MPS device
refuses, and it catches each device bug that issue 12 found in the chapters before they were fixed
(the snippets below are those chapters' lines, reduced)."""

import numpy
import pytest
import torch
from torch import nn

from device_sim import simulate


@pytest.mark.parametrize("device_type", ["cuda", "mps"])
def test_the_device_cell_picks_the_simulated_device(device_type):
    with simulate(device_type):
        if torch.cuda.is_available():
            device = torch.device("cuda")
        elif torch.backends.mps.is_available():
            device = torch.device("mps")
        else:
            device = torch.device("cpu")
        tensor = torch.ones(2, 3, device=device)
        assert device.type == device_type
        assert tensor.device.type == device_type
        assert (tensor * 2).device.type == device_type  # results stay on the device
        assert tensor.cpu().device.type == "cpu"
    assert not torch.cuda.is_available()  # uninstalled: torch is as before


@pytest.mark.parametrize("device_type", ["cuda", "mps"])
def test_mixing_devices_is_refused(device_type):
    with simulate(device_type):
        on_device = torch.ones(3, device=device_type)
        on_cpu = torch.ones(3)
        with pytest.raises(RuntimeError, match="same device"):
            on_device + on_cpu
        with pytest.raises(RuntimeError, match="same device"):
            torch.allclose(on_device, on_cpu)
        layer = nn.Linear(3, 2)  # left on the CPU
        with pytest.raises(RuntimeError, match="same device"):
            layer(on_device)
        # What the real devices accept: a CPU scalar tensor, and CPU indices inside [].
        assert (on_device * torch.tensor(2.0)).device.type == device_type
        assert on_device[torch.tensor([0, 2])].shape == (2,)


@pytest.mark.parametrize("device_type", ["cuda", "mps"])
def test_numpy_of_a_device_tensor_is_refused(device_type):
    with simulate(device_type):
        tensor = torch.ones(3, device=device_type)
        with pytest.raises(TypeError, match="numpy"):
            tensor.numpy()
        with pytest.raises(TypeError):
            numpy.asarray(tensor)
        assert tensor.cpu().numpy().tolist() == [1.0, 1.0, 1.0]


def test_float64_is_refused_on_mps_only():
    with simulate("mps"):
        with pytest.raises(TypeError, match="float64"):
            torch.zeros(3, dtype=torch.float64, device="mps")
        with pytest.raises(TypeError, match="float64"):
            torch.zeros(3, device="mps").double()
        with pytest.raises(TypeError, match="float64"):
            torch.zeros(3, dtype=torch.float64).to("mps")
        assert torch.zeros(3, dtype=torch.float64).sum().dtype == torch.float64  # fine on the CPU
    with simulate("cuda"):
        assert torch.zeros(3, dtype=torch.float64, device="cuda").dtype == torch.float64


def test_cuda_convolutions_run_in_tf32_like_cudnn():
    """Chapter 5 compared Conv1d with Linear at atol 1e-5: on a GPU with TF32 that can print False."""
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(4, 64, 32, generator=generator)
    conv = nn.Conv1d(64, 64, kernel_size=1)
    exact = conv(inputs)
    with simulate("cuda"):
        torch.backends.cudnn.allow_tf32 = True
        on_gpu = conv.to("cuda")(inputs.to("cuda")).cpu()
    conv.to("cpu")
    assert (on_gpu - exact).abs().max() > 1e-5  # what the old check's tolerance could not absorb
    assert torch.allclose(on_gpu, exact, atol=1e-2)


# The chapters' bugs found by issue 12, reduced to their lines: each must fail under the simulation.
HEAD_BUGS = {
    "ch1 exercise 3: a CPU tensor compared with a device tensor": (
        "cuda",
        (
            "table = torch.zeros(5, 4, device=device)\n"
            "expected = torch.zeros(5, 4)\n"
            "torch.testing.assert_close(table, expected)\n"
        ),
    ),
    "ch1/2/4/8: float64 made on the device": (
        "mps",
        "scores = torch.randn(4, 4, dtype=torch.float64, device=device)\n",
    ),
    "float64 conversion of a device tensor": (
        "mps",
        ("weights = torch.softmax(torch.randn(4, 4, device=device), dim=-1)\nweights.double()\n"),
    ),
    "a chart frame from a device tensor": (
        "cuda",
        ("import pandas as pd\nvalues = torch.randn(3, device=device)\npd.DataFrame({'value': values.numpy()})\n"),
    ),
}


@pytest.mark.parametrize("bug", sorted(HEAD_BUGS))
def test_the_simulation_catches_the_bugs_issue_12_found(bug):
    device_type, code = HEAD_BUGS[bug]
    with simulate(device_type):
        namespace = {"torch": torch, "device": torch.device(device_type)}
        with pytest.raises((RuntimeError, TypeError, AssertionError)):
            exec(code, namespace)  # noqa: S102 (test code)
    # The same lines run on the CPU without complaint: it is the device that makes them wrong.
    exec(code, {"torch": torch, "device": torch.device("cpu")})  # noqa: S102
