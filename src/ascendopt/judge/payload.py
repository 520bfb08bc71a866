"""Values as bytes across the judge's process boundary.

What a worker hands the parent (the outputs of a call, the inputs after it) and what the parent hands a
worker (the input sets the trusted maker made) travel as one payload: an 8-byte little-endian header length,
the header as JSON, then every tensor's elements in C order, back to back. The header holds the value's
structure (tuples, lists, dicts, plain scalars) with tensors as references::

    {"tree": NODE, "tensors": [{"dtype": "bfloat16", "shape": [8, 128], "nbytes": 2048}, ...]}
    NODE: {"t": i} tensor i | {"u": [NODE]} tuple | {"l": [NODE]} list | {"d": [[NODE, NODE]]} dict
          | {"v": int/float/bool/str/None} | {"dt": "float16"} a torch.dtype | {"dv": "cuda:0"} a torch.device
          | {"x": "what it is"} anything else (kept by name, never compared)

A tensor that is not a plain, materialized, strided ``torch.Tensor`` (a subclass, a lazy or fake tensor, a
meta, sparse or nested one) is a ``{"t": i}`` whose entry carries ``"problem"`` and no bytes: the parent
fails it, it never asks it for its values.

Why raw memory (``RawReader``): a tensor read through torch (``.cpu()``, ``.tolist()``, ``torch.save``)
passes the operator dispatcher and Python attribute look-ups, both of which code in the same process can
intercept (a dispatch mode, an operator registered from outside torch, a patched ``torch.Tensor`` method) to
finish a lazy result or return other bytes. The reader binds ``torch._C.TensorBase``'s own descriptors (an
immutable type: they cannot be replaced) before the tree under test is imported, and copies the bytes from
the tensor's memory with ``ctypes`` (host memory) or the device runtime's copy function (CUDA: ``cudaMemcpy``
from the process's loaded ``libcudart``). Where no such function is found (the NPU runtime on a host without
CANN, the fake ``torch_npu`` of the tests) the device's memory is read through torch, and ``RawReader.through``
says so.

Decoding (``decode``) runs in the parent: CPU tensors built from the bytes, no pickle, nothing executed.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from typing import Any

HEADER = struct.Struct("<Q")  # the header's length in bytes
MAX_DEPTH = 8  # nesting followed into a value (deeper parts are kept by name only)


class PayloadError(ValueError):
    """A payload that does not decode: truncated, or a header that does not describe its bytes; or memory that
    cannot be read (``errno`` then says why)."""

    errno: int = 0


# -- encoding (in a worker: the reader is bound before the tree under test is imported) --------------


class RawReader:
    """Reads a tensor's elements from its memory, past torch's dispatcher and Python attribute look-ups.

    Built once from ``torch`` before any code under test is imported: every descriptor it uses is taken
    from ``torch._C.TensorBase`` (immutable, so later patching of ``torch.Tensor`` does not reach it).
    ``read(t)`` -> ``(meta, bytes)``: ``meta`` ``{"dtype", "shape", "nbytes"}`` (or ``{"problem"}``).
    ``through``: "raw memory" when device memory is copied by the runtime's own function, else a sentence
    saying it is read through torch (``.cpu()``, bound early; a second line, not raw memory).
    """

    def __init__(self, torch, synchronize: Callable[[], None] | None = None):
        import ctypes
        import inspect

        import numpy

        base = torch._C.TensorBase
        self._tensor = torch.Tensor
        self._base = base

        def get(name: str):
            return inspect.getattr_static(base, name)

        self._dtype = get("dtype").__get__
        self._shape = get("shape").__get__
        self._device = get("device").__get__
        self._layout = get("layout").__get__
        self._is_meta = get("is_meta").__get__
        self._requires_grad = get("requires_grad").__get__
        self._data_ptr = get("data_ptr")
        self._offset = get("storage_offset")
        self._stride = get("stride")
        self._element_size = get("element_size")
        self._numel = get("numel")
        self._storage = get("untyped_storage")
        self._storage_ptr = inspect.getattr_static(torch._C.StorageBase, "data_ptr")
        self._cpu = get("cpu")
        self._strided = torch.strided
        self._string_at = ctypes.string_at
        self._as_strided = numpy.lib.stride_tricks.as_strided
        self._frombuffer = numpy.frombuffer
        self._sync = synchronize
        self._device_copy = _device_copier(ctypes)
        self.through = "raw memory" if self._device_copy is not None else (
            "device memory read through torch (.cpu(), bound before the code under test loaded): no raw copy "
            "function of the device runtime was found")

    def problem(self, t: Any) -> str | None:
        """Why ``t`` cannot be read as a plain tensor's elements, or None."""
        kind = type(t)
        if kind is not self._tensor:
            return f"a {kind.__module__}.{kind.__name__}, not a plain torch.Tensor"
        if self._is_meta(t):
            return "a meta tensor (no data)"
        if self._layout(t) is not self._strided:
            return f"a {self._layout(t)} tensor (not strided)"
        if self._numel(t) and self._storage_ptr(self._storage(t)) == 0:
            return "a tensor without storage (not materialized)"
        return None

    def read(self, t: Any) -> tuple[dict[str, Any], bytes]:
        why = self.problem(t)
        if why is not None:
            return {"problem": why}, b""
        dtype = str(self._dtype(t)).removeprefix("torch.")
        shape = [int(s) for s in self._shape(t)]
        size = self._element_size(t)
        n = self._numel(t)
        if n == 0:
            return {"dtype": dtype, "shape": shape, "nbytes": 0}, b""
        strides = [int(s) for s in self._stride(t)]
        # the span of memory the view covers, in elements from its first one
        span = 1 + sum((d - 1) * s for d, s in zip(shape, strides, strict=True))
        device = self._device(t)
        if device.type == "cpu":
            raw = self._string_at(self._data_ptr(t), span * size)
        elif self._device_copy is not None and device.type in self._device_copy:
            if self._sync is not None:
                self._sync()
            raw = self._device_copy[device.type](self._data_ptr(t), span * size)
        else:  # no raw copy function for this device: through torch (bound before the tree loaded)
            host = self._cpu(t)
            strides = [int(s) for s in self._stride(host)]
            span = 1 + sum((d - 1) * s for d, s in zip(shape, strides, strict=True))
            raw = self._string_at(self._data_ptr(host), span * size)
        contiguous = strides == _c_strides(shape)
        meta: dict[str, Any] = {"dtype": dtype, "shape": shape}
        if not contiguous:
            flat = self._frombuffer(raw, dtype=f"V{size}")
            raw = self._as_strided(flat, shape=shape, strides=[s * size for s in strides]).tobytes()
            if _dense(shape, strides):  # a transposed or permuted view: remade with its layout
                meta["stride"] = strides
        if self._requires_grad(t):
            meta["grad"] = True
        return {**meta, "nbytes": len(raw)}, raw


    def where(self, t: Any) -> dict[str, Any]:
        """Where ``t``'s elements are in this process's memory, for a reader in another process (``fetch``):
        ``{"dtype", "shape", "strides" (elements), "size" (bytes an element), "ptr", "span" (bytes)}``, or
        ``{"problem"}``, or ``{"device": type}`` for device memory (not readable from outside)."""
        why = self.problem(t)
        if why is not None:
            return {"problem": why}
        device = self._device(t)
        if device.type != "cpu":
            return {"device": device.type}
        shape = [int(s) for s in self._shape(t)]
        strides = [int(s) for s in self._stride(t)]
        size = int(self._element_size(t))
        span = (1 + sum((d - 1) * s for d, s in zip(shape, strides, strict=True))) * size if self._numel(t) else 0
        return {"dtype": str(self._dtype(t)).removeprefix("torch."), "shape": shape, "strides": strides, "size": size,
                "ptr": int(self._data_ptr(t)), "span": span}


def describe(value: Any, reader: RawReader) -> dict[str, Any]:
    """``value``'s structure with each tensor's place in memory (``RawReader.where``): what the parent needs to
    read the value out of this process itself (``fetch``) while this process is stopped."""
    places: list[dict[str, Any]] = []

    def place(t: Any) -> int:
        places.append(reader.where(t))
        return len(places) - 1

    return {"tree": _tree(value, reader, place), "places": places}


def readable(described: Mapping[str, Any]) -> bool:
    """Whether every tensor of a ``describe``d value is in host memory (``fetch`` can read it)."""
    return not any("device" in p for p in described["places"])


def fetch(pid: int, described: Mapping[str, Any], max_bytes: int = 1 << 34) -> bytes:
    """The payload (``encode``'s format) of a value ``describe``d by process ``pid``, its elements read from that
    process's memory by this one (``process_vm_readv``): nothing of that process runs to produce them. The
    caller stops the process first, so what is read is what it held when it replied. PayloadError when a place
    cannot be read (freed, forged, or more than ``max_bytes`` in all)."""
    import numpy

    metas: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    total = 0
    for place in described["places"]:
        if "problem" in place:
            metas.append({"problem": str(place["problem"])})
            chunks.append(b"")
            continue
        shape, strides = [int(d) for d in place["shape"]], [int(s) for s in place["strides"]]
        size, span = int(place["size"]), int(place["span"])
        total += span
        if total > max_bytes or size <= 0 or len(shape) != len(strides) or min(strides, default=0) < 0:
            raise PayloadError("a described output does not describe a tensor this judge reads")
        raw = read_memory(pid, int(place["ptr"]), span) if span else b""
        if span and strides != _c_strides(shape):
            flat = numpy.frombuffer(raw, dtype=f"V{size}")
            raw = numpy.lib.stride_tricks.as_strided(flat, shape=shape, strides=[s * size for s in strides]).tobytes()
        metas.append({"dtype": str(place["dtype"]), "shape": shape, "nbytes": len(raw)})
        chunks.append(raw)
    header = json.dumps({"tree": described["tree"], "tensors": metas}).encode()
    return HEADER.pack(len(header)) + header + b"".join(chunks)


def read_memory(pid: int, address: int, nbytes: int) -> bytes:
    """``nbytes`` of process ``pid``'s memory at ``address`` (Linux ``process_vm_readv``; the judge may read its own
    children's). PayloadError when they cannot be read."""
    import ctypes
    import os

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(nbytes)
    done = 0
    while done < nbytes:
        local = IoVec(ctypes.addressof(buffer) + done, nbytes - done)
        remote = IoVec(address + done, nbytes - done)
        got = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            err = ctypes.get_errno()
            problem = PayloadError(f"cannot read {nbytes} bytes of process {pid}'s memory at {address:#x}: "
                                   f"{os.strerror(err) if err else 'nothing read'}")
            problem.errno = err
            raise problem
        done += got
    return buffer.raw


def _dense(shape: list[int], strides: list[int]) -> bool:
    """Whether a view of ``shape`` with ``strides`` covers its memory once, without gaps or overlaps (a permutation of
    a contiguous layout), so ``torch.empty_strided`` can remake it."""
    expected = 1
    for size, stride in sorted(((d, s) for d, s in zip(shape, strides, strict=True) if d != 1), key=lambda x: x[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _c_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return strides[::-1]


def _device_copier(ctypes) -> dict[str, Callable[[int, int], bytes]] | None:
    """``{"cuda": copy(device_ptr, nbytes) -> bytes}`` through ``cudaMemcpy`` of the ``libcudart`` this process
    has loaded (torch's); None when there is none."""
    path = _loaded_library("libcudart")
    if path is None:
        return None
    try:
        runtime = ctypes.CDLL(path)
        memcpy = runtime.cudaMemcpy
    except (OSError, AttributeError):
        return None
    memcpy.restype = ctypes.c_int
    memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    device_to_host = 2  # cudaMemcpyDeviceToHost

    def copy(pointer: int, nbytes: int) -> bytes:
        buffer = ctypes.create_string_buffer(nbytes)
        status = memcpy(buffer, ctypes.c_void_p(pointer), nbytes, device_to_host)
        if status != 0:
            raise RuntimeError(f"cudaMemcpy of {nbytes} bytes failed with error {status}")
        return buffer.raw

    return {"cuda": copy}


def _loaded_library(stem: str) -> str | None:
    """The path of a shared library whose name starts with ``stem`` that this process has mapped (Linux)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ")[-1]
                if path.rsplit("/", 1)[-1].startswith(stem + "."):
                    return path
    except OSError:
        return None
    return None


def _tree(value: Any, reader: RawReader, on_tensor) -> dict[str, Any]:
    """``value``'s structure as payload nodes, each tensor replaced by ``{"t": i}`` where ``i = on_tensor(t)``."""

    def node(item: Any, depth: int) -> dict[str, Any]:
        if isinstance(item, reader._base):
            return {"t": on_tensor(item)}
        if item is None or isinstance(item, (bool, int, float, str)):
            return {"v": item}
        kind = type(item)
        if kind.__module__ == "torch" and kind.__name__ in ("dtype", "device"):  # a dtype= or device= argument
            return {"dt" if kind.__name__ == "dtype" else "dv": str(item).removeprefix("torch.")}
        if depth >= MAX_DEPTH:
            return {"x": f"nested deeper than {MAX_DEPTH}"}
        # subclasses too, as their base (a named tuple, torch.return_types' structseqs, an OrderedDict): their
        # values are what is compared, never left opaque
        if isinstance(item, tuple):
            return {"u": [node(x, depth + 1) for x in tuple.__iter__(item)]}
        if isinstance(item, list):
            return {"l": [node(x, depth + 1) for x in list.__iter__(item)]}
        if isinstance(item, dict):
            return {"d": [[node(k, depth + 1), node(v, depth + 1)] for k, v in dict.items(item)]}
        return {"x": type(item).__name__}

    return node(value, 0)


def encode(value: Any, reader: RawReader) -> bytes:
    """``value`` (tensors, tuples, lists, dicts, scalars, nested) as one payload, its tensors read by ``reader``."""
    tensors: list[dict[str, Any]] = []
    chunks: list[bytes] = []

    def read(t: Any) -> int:
        meta, raw = reader.read(t)
        tensors.append(meta)
        chunks.append(raw)
        return len(tensors) - 1

    tree = _tree(value, reader, read)
    header = json.dumps({"tree": tree, "tensors": tensors}).encode()
    return HEADER.pack(len(header)) + header + b"".join(chunks)


# -- decoding (in the parent) ------------------------------------------------------------------------


def decode(blob: bytes, grad: bool = False) -> Any:
    """The value a payload holds, tensors as CPU ``torch.Tensor`` (a tensor that had a problem: a ``Refused``), each in
    the layout it had when it was a dense view; ``grad``: the tensors that required grad require it again (a
    worker's inputs; the judge compares values only)."""
    import torch

    if len(blob) < HEADER.size:
        raise PayloadError(f"a payload of {len(blob)} bytes has no header")
    (length,) = HEADER.unpack_from(blob)
    try:
        header = json.loads(blob[HEADER.size:HEADER.size + length])
        metas = header["tensors"]
        tree = header["tree"]
    except (ValueError, KeyError, TypeError) as exc:
        raise PayloadError(f"a payload's header does not read: {exc}") from exc
    at = HEADER.size + length
    tensors: list[Any] = []
    for meta in metas:
        if "problem" in meta:
            tensors.append(Refused(str(meta["problem"])))
            continue
        dtype = getattr(torch, str(meta.get("dtype")), None)
        if not isinstance(dtype, torch.dtype):
            raise PayloadError(f"a payload names the unknown dtype {meta.get('dtype')!r}")
        shape, nbytes = [int(s) for s in meta["shape"]], int(meta["nbytes"])
        expected = dtype.itemsize * _numel(shape)
        if nbytes != expected or at + nbytes > len(blob):
            raise PayloadError(f"a payload's tensor {dtype}{shape} holds {nbytes} bytes, needs {expected} "
                               f"({len(blob) - at} left)")
        if nbytes == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(blob[at:at + nbytes]), dtype=dtype).reshape(shape)
        stride = meta.get("stride")
        if isinstance(stride, list) and len(stride) == len(shape) and _dense(shape, [int(s) for s in stride]):
            t = torch.empty_strided(shape, [int(s) for s in stride], dtype=dtype).copy_(t)  # the layout it had
        if grad and meta.get("grad") is True and (dtype.is_floating_point or dtype.is_complex):
            t.requires_grad_(True)
        tensors.append(t)
        at += nbytes
    if at != len(blob):
        raise PayloadError(f"a payload has {len(blob) - at} bytes its header does not describe")
    return _build(tree, tensors, 0)


def scaled(blob: bytes, factor: float) -> bytes:
    """``blob`` (a payload) with every floating-point and complex tensor multiplied by ``factor``: the same header,
    dtypes and shapes; integer, boolean and refused tensors as they were. The differential check's value probe
    (``judge.engine.value_probe``). PayloadError when ``blob`` does not decode."""
    import torch

    decode(blob)  # the same checks of its header and sizes
    (length,) = HEADER.unpack_from(blob)
    at = HEADER.size + length
    out = [blob[:at]]
    for meta in json.loads(blob[HEADER.size:at])["tensors"]:
        if "problem" in meta:
            continue
        dtype, nbytes = getattr(torch, str(meta["dtype"])), int(meta["nbytes"])
        raw = blob[at:at + nbytes]
        at += nbytes
        if nbytes and (dtype.is_floating_point or dtype.is_complex):
            raw = (torch.frombuffer(bytearray(raw), dtype=dtype) * factor).view(torch.uint8).numpy().tobytes()
        out.append(raw)
    return b"".join(out)


class Refused:
    """A tensor the worker's reader would not read (``RawReader.problem``); compared as a failure."""

    def __init__(self, problem: str):
        self.problem = problem

    def __repr__(self) -> str:
        return f"Refused({self.problem!r})"


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _build(node: Mapping[str, Any], tensors: list[Any], depth: int) -> Any:
    if depth > MAX_DEPTH + 1:
        raise PayloadError("a payload nests deeper than it may")
    if "t" in node:
        return tensors[int(node["t"])]
    if "v" in node:
        return node["v"]
    if "u" in node:
        return tuple(_build(n, tensors, depth + 1) for n in node["u"])
    if "l" in node:
        return [_build(n, tensors, depth + 1) for n in node["l"]]
    if "d" in node:
        return {_key(_build(k, tensors, depth + 1)): _build(v, tensors, depth + 1) for k, v in node["d"]}
    if "dt" in node or "dv" in node:
        import torch

        if "dv" in node:
            return torch.device(str(node["dv"]))
        dtype = getattr(torch, str(node["dt"]), None)
        if not isinstance(dtype, torch.dtype):
            raise PayloadError(f"a payload names dtype {node['dt']!r}, which torch does not have")
        return dtype
    if "x" in node:
        return Opaque(str(node["x"]))
    raise PayloadError(f"a payload's node {sorted(node)} is of no known kind")


def _key(key: Any) -> Any:
    return key if isinstance(key, (str, int, float, bool, type(None))) else repr(key)


class Opaque:
    """A part of a value the payload keeps by its type name only (an object that is not data)."""

    def __init__(self, what: str):
        self.what = what

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.what == self.what

    def __hash__(self) -> int:
        return hash(self.what)

    def __repr__(self) -> str:
        return f"Opaque({self.what!r})"
