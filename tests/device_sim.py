"""A simulated CUDA GPU or Apple MPS device on a CPU-only machine: are the chapters device-safe?

``install("cuda")`` (or ``"mps"``) makes ``torch.cuda.is_available()`` (or
``torch.backends.mps.is_available()``) answer True, so a chapter's device cell picks that device.
From then on a tensor made on, or moved to, that device is a CPU tensor whose class says where it
"is": ``tensor.device`` reports ``cuda:0`` (or ``mps:0``) and the values are the CPU's. A
``TorchFunctionMode`` sees every torch call and refuses, with the real device's error, what the
real device refuses:

* tensors on two devices in one operation (CUDA and MPS accept a CPU tensor with no axes as a
  scalar, and CPU index tensors inside ``[]``; so does the simulation);
* ``.numpy()`` of a device tensor (so also ``numpy.asarray``, pandas, ...);
* a random-number ``generator`` on another device than the tensor it fills;
* a ``.grad`` assigned from another device than its tensor's;
* on MPS, any float64 (or complex128) tensor on the device, made or converted;
* on CUDA, convolutions in TF32 (10 mantissa bits) while ``torch.backends.cudnn.allow_tf32`` is
  True, cuDNN's default on recent GPUs (a numerical difference, not an error).

It also stands in for the ``torch.cuda`` / ``torch.mps`` calls chapters make (``synchronize``,
memory statistics, ...; the statistics read 0), gives a ``torch.Generator`` that accepts ``device=``
and makes torch's modules take the paths they take on the device (``nn.MultiheadAttention``'s
fast path is not turned off by the simulation's own mode).

Code inside torch (the body of a torch function written in Python) sees the real device, the CPU,
so torch's own helpers never try to allocate on a device this build lacks; only the caller's code
sees the simulated one. ``uninstall()`` (or ``with simulate("mps"): ...``) puts torch back.
"""

from __future__ import annotations

import contextlib
import threading

import torch
from torch.overrides import TorchFunctionMode

SIMULATED_TYPES = ("cuda", "mps")
_CPU = torch.device("cpu")
_NO_FLOAT64 = (torch.float64, torch.complex128)  # MPS has no 64-bit floating point
_DISABLED = torch._C._disabled_torch_function_impl
_state = threading.local()  # depth > 0 while torch's own code runs: real devices are reported


def _inside_torch() -> bool:
    return getattr(_state, "depth", 0) > 0


class _Inside:
    def __enter__(self):
        _state.depth = getattr(_state, "depth", 0) + 1

    def __exit__(self, *exc):
        _state.depth -= 1


_INSIDE = _Inside()


class SimulatedTensor(torch.Tensor):
    """Base of the classes of tensors "on" the simulated device (their data is on the CPU)."""

    simulated_device: torch.device = _CPU
    real_class: type = torch.Tensor
    __torch_function__ = _DISABLED

    @property
    def device(self):
        return _CPU if _inside_torch() else self.simulated_device

    @property
    def is_cuda(self):
        return not _inside_torch() and self.simulated_device.type == "cuda"

    @property
    def is_mps(self):
        return not _inside_torch() and self.simulated_device.type == "mps"

    @property
    def is_cpu(self):
        return _inside_torch()

    def get_device(self):
        return -1 if _inside_torch() else 0


_classes: dict[tuple[type, str], type] = {}


def _simulated_class(real_class: type, device: torch.device) -> type:
    """The class of the instances of ``real_class`` (Tensor, Parameter, ...) on ``device``."""
    key = (real_class, device.type)
    if key not in _classes:
        _classes[key] = type(
            f"{device.type.upper()}{real_class.__name__}",
            (SimulatedTensor, real_class),
            {
                "simulated_device": torch.device(device.type, 0),
                "real_class": real_class,
                "__torch_function__": _DISABLED,
                "__module__": __name__,
            },
        )
    return _classes[key]


def device_of(tensor: torch.Tensor) -> torch.device:
    """Where ``tensor`` is, simulated or real."""
    if isinstance(tensor, SimulatedTensor):
        return type(tensor).simulated_device
    return torch.Tensor.device.__get__(tensor)


def _move(tensor: torch.Tensor, device: torch.device) -> None:
    """Relabel ``tensor``, in place, as being on ``device``."""
    simulated = isinstance(tensor, SimulatedTensor)
    real = type(tensor).real_class if simulated else type(tensor)
    if device.type in SIMULATED_TYPES:
        tensor.__class__ = _simulated_class(real, device)
    elif simulated:
        tensor.__class__ = real


class SimulatedGenerator(torch.Generator):
    """``torch.Generator`` that accepts ``device="cuda"``/``"mps"`` (it draws on the CPU)."""

    def __new__(cls, device=None):
        generator = super().__new__(cls)
        target = _CPU if device is None else torch.device(device)
        generator.simulated_device = torch.device(target.type, 0) if target.type in SIMULATED_TYPES else target
        return generator

    def __init__(self, device=None):
        super().__init__()

    @property
    def device(self):
        return self.simulated_device


def _tensors(values, found: list) -> list:
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            _tensors(value, found)
        elif isinstance(value, dict):
            _tensors(value.values(), found)
    return found


def _common_device(tensors: list) -> torch.device:
    """The one device of ``tensors``; CPU tensors with no axes (scalars) go with any device."""
    found = None
    for tensor in tensors:
        device = device_of(tensor)
        if device.type == "cpu" and tensor.dim() == 0:
            continue
        if found is None:
            found = device
        elif device != found:
            simulated = found if found.type in SIMULATED_TYPES else device
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two "
                f"devices, {found} and {device}! (simulated {simulated.type})"
            )
    return found or _CPU


def _to_tf32(tensor: torch.Tensor) -> torch.Tensor:
    """Round float32 values to TF32 (10 mantissa bits, to nearest even), keeping the gradient."""
    if tensor.dtype != torch.float32:
        return tensor
    with torch.no_grad():
        bits = tensor.detach().contiguous().view(torch.int32)
        lowest_kept = (bits >> 13) & 1
        rounded = ((bits + 0x0FFF + lowest_kept) & ~0x1FFF).view(torch.float32)
    return tensor + (rounded.view(tensor.shape) - tensor).detach()


_CONVOLUTIONS = {torch.conv1d, torch.conv2d, torch.conv3d, torch.convolution}
_TO_NUMPY = {"numpy", "__array__"}
_MOVES = {"copy_", "to", "cuda", "cpu", "mps"}
_INDEXING = {"__getitem__", "__setitem__"}
_FROM_DATA = {torch.tensor, torch.as_tensor, torch.asarray}
# Questions about a tensor that no device refuses: answered as on the CPU, quickly.
_QUERIES = {
    "_has_compatible_shallow_copy_type",
    "is_set_to",
    "is_same_size",
    "data_ptr",
    "untyped_storage",
    "_typed_storage",
    "__hash__",
    "__len__",
    "dim",
    "size",
    "numel",
    "stride",
    "is_contiguous",
    "is_floating_point",
    "is_complex",
    "element_size",
    "item",
    "tolist",
    "__bool__",
    "__float__",
    "__int__",
    "__index__",
    "requires_grad_",
    "retain_grad",
    "register_hook",
}
# Tensor methods written in Python that treat subclasses differently (``type(self) is Tensor``):
# they run with the tensor's real class, so printing and formatting read as on the CPU.
_AS_REAL_CLASS = {"__format__", "__repr__", "__str__", "__deepcopy__", "__reduce_ex__"}
_PLAIN_ATTRIBUTES = {
    "shape",
    "dtype",
    "requires_grad",
    "is_leaf",
    "grad_fn",
    "ndim",
    "layout",
    "is_sparse",
    "is_quantized",
    "is_meta",
    "is_nested",
    "names",
    "_version",
    "output_nr",
    "itemsize",
    "nbytes",
    "device",
    "is_cuda",
    "is_mps",
    "is_cpu",
    "_backward_hooks",
    "_base",
    "_cdata",
}


class DeviceSimulation(TorchFunctionMode):
    """Tracks, for every torch call, where its tensors are; refuses what the device refuses."""

    def __init__(self, device_type: str):
        super().__init__()
        if device_type not in SIMULATED_TYPES:
            raise ValueError(f"device_type must be one of {SIMULATED_TYPES}; got {device_type!r}")
        self.device = torch.device(device_type, 0)
        self.operations = 0  # torch calls whose result is on the simulated device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name == "__get__" or name == "__set__":
            return self._attribute(func, name, args)
        kwargs = dict(kwargs) if kwargs else {}
        if name in _QUERIES:
            return func(*args, **kwargs)
        if name in _AS_REAL_CLASS and args and isinstance(args[0], SimulatedTensor):
            return self._as_real_class(func, args, kwargs)

        if func in _FROM_DATA:  # torch.tensor([...]) reads values; only the device counts
            data = args[0] if args else kwargs.get("data")
            tensors = [data] if isinstance(data, torch.Tensor) and name != "tensor" else []
        else:
            tensors = _tensors(kwargs.values(), _tensors(args, []))

        if name in _TO_NUMPY and tensors and isinstance(tensors[0], SimulatedTensor):
            raise TypeError(
                f"can't convert {device_of(tensors[0])} device type tensor to numpy. Use "
                "Tensor.cpu() to copy the tensor to host memory first. (simulated)"
            )

        if name in _MOVES and args and isinstance(args[0], torch.Tensor):
            target, args, kwargs = self._parse_move(name, args, kwargs)
        elif name in _INDEXING and args and isinstance(args[0], torch.Tensor):
            target = self._indexing(args)
        elif kwargs.get("device") is not None:
            target, kwargs["device"] = self._target(kwargs["device"])
            _common_device(tensors)
        elif tensors:
            target = _common_device(tensors)
        else:
            target = _CPU

        generator = kwargs.get("generator")
        if generator is not None and target.type in ("cpu", "cuda", "mps"):
            generator_device = getattr(generator, "simulated_device", generator.device)
            if generator_device.type != target.type:
                raise RuntimeError(
                    f"Expected a '{target.type}' device type for generator but found "
                    f"'{generator_device.type}' (simulated)"
                )

        if target.type == "cuda" and func in _CONVOLUTIONS and torch.backends.cudnn.allow_tf32:
            args = tuple(_to_tf32(a) if isinstance(a, torch.Tensor) else a for a in args)

        with _INSIDE:
            result = func(*args, **kwargs)
        if target.type == "mps":
            self._check_no_float64(result)
        if target.type in SIMULATED_TYPES:
            self.operations += 1
            return self._label(result, tensors, target)
        if any(isinstance(tensor, SimulatedTensor) for tensor in tensors):
            return self._label(result, tensors, target)
        return result

    def _target(self, device) -> tuple[torch.device, torch.device]:
        """The requested device, and the one to pass to torch (the CPU, for ours)."""
        device = device if isinstance(device, torch.device) else torch.device(device)
        if device.type == self.device.type:
            return self.device, _CPU
        return device, device

    def _check_no_float64(self, result) -> None:
        if any(tensor.dtype in _NO_FLOAT64 for tensor in _tensors([result], [])):
            raise TypeError(
                "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't "
                "support float64. Please use float32 instead. (simulated mps)"
            )

    def _label(self, result, inputs: list, target: torch.device):
        """Relabel the tensors in ``result`` as being on ``target``."""
        if isinstance(result, torch.Tensor):
            if device_of(result) != target:
                if any(result is tensor for tensor in inputs):
                    result = result.clone()  # a real move copies; the input stays where it is
                _move(result, target)
            return result
        if isinstance(result, (list, tuple)):
            labelled = [self._label(item, inputs, target) for item in result]
            if all(new is old for new, old in zip(labelled, result)):
                return result  # (named tuples, torch.return_types: relabelled in place)
            return type(result)(labelled)
        return result

    def _as_real_class(self, func, args, kwargs):
        tensor = args[0]
        simulated = type(tensor)
        tensor.__class__ = simulated.real_class
        try:
            with _INSIDE:
                result = func(*args, **kwargs)
        finally:
            tensor.__class__ = simulated
        if isinstance(result, torch.Tensor):
            _move(result, simulated.simulated_device)
        return result

    def _indexing(self, args) -> torch.device:
        """``x[index]``, ``x[index] = value``: CPU index tensors are fine, others must match."""
        indexed = device_of(args[0])
        for index in _tensors(args[1:2], []):
            where = device_of(index)
            if where != indexed and where.type != "cpu":
                raise RuntimeError(
                    "indices should be either on cpu or on the same device as the indexed "
                    f"tensor ({indexed}) (simulated)"
                )
        return indexed

    def _parse_move(self, name, args, kwargs):
        """``.to(...)``, ``.cuda()``, ``.cpu()``, ``.copy_(...)``: where the result goes."""
        source = args[0]
        if name == "copy_":  # copies between devices are allowed; the destination stays put
            return device_of(source), args, kwargs
        if name == "cpu":
            return _CPU, args, kwargs
        if name in ("cuda", "mps"):
            target, real = self._target(name)
            if real == _CPU:
                return target, (source,), {"device": _CPU}
            return target, args, kwargs  # the other device: this build refuses, as it should
        rest = list(args[1:])
        if rest and isinstance(rest[0], torch.Tensor):  # .to(other): other's device and dtype
            other = rest.pop(0)
            kwargs.setdefault("dtype", other.dtype)
            rest.insert(0, device_of(other))
        copy = kwargs.pop("copy", False)
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*rest, **kwargs)
        options = {"dtype": dtype, "non_blocking": non_blocking, "copy": copy}
        if memory_format is not None:
            options["memory_format"] = memory_format
        if device is None:
            return device_of(source), (source,), options
        target, real = self._target(device)
        return target, (source,), {**options, "device": real}

    def _attribute(self, func, name, args):
        """``.grad``, ``.data``, ``.T``, ...: a tensor attribute is on its tensor's device."""
        attribute = getattr(func.__self__, "__name__", "")
        if attribute in _PLAIN_ATTRIBUTES:
            return func(*args)
        owner = args[0]
        with _INSIDE:
            result = func(*args)
        if name == "__get__":
            if isinstance(result, torch.Tensor) and device_of(result) != device_of(owner):
                _move(result, device_of(owner))
        elif attribute == "data":
            _move(owner, device_of(args[1]))
        elif attribute == "grad" and isinstance(args[1], torch.Tensor) and device_of(args[1]) != device_of(owner):
            with _INSIDE:
                func(owner, None)
            raise RuntimeError(
                "assigned grad has data located on a different device (simulated): "
                f"{device_of(args[1])} for a tensor on {device_of(owner)}"
            )
        return result


def _has_torch_function(arguments) -> bool:
    """``torch.overrides.has_torch_function`` as on the device: the simulation's mode is not one.

    ``nn.MultiheadAttention`` and ``nn.TransformerEncoder(Layer)`` skip their fast path when it
    answers True; on a real device (and on the CPU) nothing overrides torch, so they take it.
    """
    stack = torch.overrides._get_current_function_mode_stack()
    if stack and all(isinstance(mode, DeviceSimulation) for mode in stack):
        return any(
            type(argument).__torch_function__ is not _DISABLED and type(argument) is not torch.Tensor
            for argument in arguments
            if isinstance(argument, torch.Tensor)
        )
    return _ORIGINAL_HAS_TORCH_FUNCTION(arguments)


_ORIGINAL_HAS_TORCH_FUNCTION = torch.overrides.has_torch_function


def _fakes(device_type: str) -> list[tuple[object, str, object]]:
    """What to replace in torch while ``device_type`` is simulated: (owner, name, value)."""
    cuda, mps = device_type == "cuda", device_type == "mps"
    replaced = [
        (torch.cuda, "is_available", lambda: cuda),
        (torch.backends.mps, "is_available", lambda: mps),
        (torch, "Generator", SimulatedGenerator),
        (torch.overrides, "has_torch_function", _has_torch_function),
    ]
    if cuda:
        replaced += [
            (torch.cuda, name, value)
            for name, value in {
                "device_count": lambda: 1,
                "current_device": lambda: 0,
                "get_device_name": lambda device=None: "Simulated CUDA device",
                "get_device_capability": lambda device=None: (8, 0),
                "synchronize": lambda device=None: None,
                "empty_cache": lambda: None,
                "memory_allocated": lambda device=None: 0,
                "max_memory_allocated": lambda device=None: 0,
                "memory_reserved": lambda device=None: 0,
                "max_memory_reserved": lambda device=None: 0,
                "reset_peak_memory_stats": lambda device=None: None,
                "manual_seed": lambda seed: None,
                "manual_seed_all": lambda seed: None,
            }.items()
        ]
    if mps:
        replaced += [(torch.backends.mps, "is_built", lambda: True)]
        replaced += [
            (torch.mps, name, value)
            for name, value in {
                "synchronize": lambda: None,
                "empty_cache": lambda: None,
                "current_allocated_memory": lambda: 0,
                "driver_allocated_memory": lambda: 0,
                "manual_seed": lambda seed: None,
                "seed": lambda: None,
            }.items()
        ]
    return replaced


_installed: list[tuple[DeviceSimulation, list]] = []


def install(device_type: str) -> DeviceSimulation:
    """Simulate ``device_type`` ("cuda" or "mps") until ``uninstall()``."""
    if _installed:
        raise RuntimeError(f"a device simulation is already installed: {_installed[0][0].device}")
    mode = DeviceSimulation(device_type)
    originals = []
    for owner, name, value in _fakes(device_type):
        originals.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)
    mode.__enter__()  # stays on the torch-function mode stack until uninstall()
    _installed.append((mode, originals))
    return mode


def uninstall() -> None:
    """Undo ``install``. Tensors made meanwhile keep their simulated class."""
    mode, originals = _installed.pop()
    mode.__exit__(None, None, None)
    for owner, name, original in reversed(originals):
        setattr(owner, name, original)


def installed() -> DeviceSimulation | None:
    """The simulation in place, if any."""
    return _installed[0][0] if _installed else None


@contextlib.contextmanager
def simulate(device_type: str):
    """``with simulate("mps"): ...`` runs the block on a simulated device."""
    mode = install(device_type)
    try:
        yield mode
    finally:
        uninstall()
