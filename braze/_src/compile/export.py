"""`mx.export_function`, `mx.exporter` and `mx.import_function`: traced functions in a file.

Export traces the function on placeholders with the compile tracer (`trace.py`), captures and
simplifies the tape (`simplify.py`, no fusion: a file holds primitives, never kernels) and
writes it out; import rebuilds the tape and `replay`s it on the caller's arrays. MLX's rules
are kept (python/src/export.cpp, mlx/export.cpp): inputs are positional arrays and keyword
arrays, or one list/tuple of arrays and/or one dict of arrays; keyword inputs are passed in
sorted-name order; outputs are one array or a flat list/tuple of arrays; one file holds every
trace of an exporter, chosen at call time by the inputs' dtypes and shapes (ndims when
shapeless); the imported function returns a tuple.

The file format is braze's own (MLX's `.mlxfn` files are not readable here, nor braze's by
MLX). It is JSON plus raw array bytes, so importing never runs code from the file:

    b"BRAZEFN\\0" | constant blobs (64-byte aligned) | index (UTF-8 JSON) | u64 LE len | b"BRZFNIDX"

The index sits at the end so that each new trace is appended (new blobs over the old index,
then the new index), as MLX's exporter writes as it goes. Index keys: `format`, `version`,
`byteorder`, `shapeless`, `metadata`, `constants` (shape, dtype, offset, nbytes; shared by all
traces, one per captured array), `functions`. A function holds `args` ([shape, dtype] each),
`kwargs` ([name, shape, dtype], sorted), `nodes` and `outputs`. Values are referred to by
slot: 0.. the inputs (args then kwargs), then each node's outputs in order; a negative ref
-1-k is constant k. A node is {"p": primitive, "in": refs, "out": [[shape, dtype], ...]}; a
primitive is {"prim": class name in prims.base.REGISTRY, "fields": {name: value}}; a value is
a JSON bool/int/str/null, or {"float": hex}, {"complex": [hex, hex]}, {"tuple": [...]},
{"list": [...]}, {"dtype": name} or a nested primitive.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
import sys
from typing import Any, Callable

import numpy as np

from .. import dtypes as D
from ..array import TraceState, array, node
from ..graph import _letters
from ..prims.base import REGISTRY, Primitive, bind
from ..prims.core import Copy
from . import pipeline
from .replay import ReplayPlan, replay
from .tape import Tape
from .trace import capture, compile_trace, placeholder

__all__ = ["export_function", "import_function", "exporter", "FunctionExporter",
           "ImportedFunction"]

FORMAT = "braze-function"
VERSION = 1
MAGIC = b"BRAZEFN\x00"
TAIL = b"BRZFNIDX"
_ALIGN = 64
_COPY = Copy()


# -- inputs and outputs ----------------------------------------------------------------------
def _arrays(seq) -> bool:
    return isinstance(seq, (list, tuple)) and all(isinstance(x, array) for x in seq)


def _array_dict(d) -> bool:
    return isinstance(d, dict) and all(isinstance(k, str) and isinstance(v, array)
                                       for k, v in d.items())


def split_inputs(args, kwargs, prefix):
    """MLX's accepted call forms -> (list of positional arrays, dict of keyword arrays)."""
    if not args and _array_dict(kwargs):
        return [], dict(kwargs)
    if args and isinstance(args[0], array) and _arrays(args) and _array_dict(kwargs):
        return list(args), dict(kwargs)
    if len(args) == 1 and not kwargs and not isinstance(args[0], array):
        if _arrays(args[0]):
            return list(args[0]), {}
        if _array_dict(args[0]):
            return [], dict(args[0])
    if len(args) == 2 and not kwargs and _arrays(args[0]) and _array_dict(args[1]):
        return list(args[0]), dict(args[1])
    raise ValueError(f"{prefix} Inputs can either be a variable number of positional and "
                     "keyword arrays or a single tuple and/or dictionary of arrays.")


def _flat_outputs(out) -> list:
    if isinstance(out, array):
        return [out]
    if _arrays(out):
        return list(out)
    raise ValueError("[export_function] Outputs can be either a single array, a tuple, or a "
                     f"list of arrays, got {type(out).__name__}.")


# -- primitive fields as JSON ----------------------------------------------------------------
class _Unserializable(Exception):
    pass


def _enc(v):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return {"float": float(v).hex()}
    if isinstance(v, complex):
        return {"complex": [v.real.hex(), v.imag.hex()]}
    if isinstance(v, tuple):
        return {"tuple": [_enc(x) for x in v]}
    if isinstance(v, list):
        return {"list": [_enc(x) for x in v]}
    if isinstance(v, D.Dtype):
        return {"dtype": v.name}
    if isinstance(v, Primitive):
        return encode_primitive(v)
    raise _Unserializable(type(v).__name__)


def _stored_fields(cls):
    """The fields that define a primitive (caches with compare=False are rebuilt)."""
    return [f for f in dataclasses.fields(cls) if f.init and f.compare]


def encode_primitive(prim) -> dict:
    """`prim` as JSON data; ValueError naming it when a field holds a Python object (a
    callable of a custom function, a fused kernel, ...) that a file cannot carry."""
    name = type(prim).__name__
    if REGISTRY.get(name) is not type(prim) or not dataclasses.is_dataclass(prim):
        raise ValueError(f"[export_function] The primitive {name} is not a registered "
                         "primitive and cannot be exported.")
    fields = {}
    for f in _stored_fields(type(prim)):
        try:
            fields[f.name] = _enc(getattr(prim, f.name))
        except _Unserializable as e:
            raise ValueError(
                f"[export_function] The primitive {name} cannot be exported: its field "
                f"`{f.name}` holds a Python {e} object, which a file cannot carry (custom "
                "functions, checkpoint, kernels fused by mx.compile and custom kernels are "
                "not exportable).") from None
    return {"prim": name, "fields": fields}


def _dec(v):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, dict) and len(v) == 1:
        (tag, x), = v.items()
        if tag == "float":
            return float.fromhex(x)
        if tag == "complex":
            re, im = x
            return complex(float.fromhex(re), float.fromhex(im))
        if tag == "tuple":
            return tuple(_dec(y) for y in x)
        if tag == "list":
            return [_dec(y) for y in x]
        if tag == "dtype":
            return _dtype(x)
    if isinstance(v, dict) and set(v) == {"prim", "fields"}:
        return decode_primitive(v)
    raise ValueError(f"unknown field value {v!r}")


def decode_primitive(obj) -> Primitive:
    """The registered primitive described by `obj` (only registry classes are built)."""
    name = obj["prim"]
    cls = REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown primitive {name!r}")
    fields = obj["fields"]
    known = {f.name for f in _stored_fields(cls)}
    if not isinstance(fields, dict) or not set(fields) <= known:
        raise ValueError(f"bad fields for {name}: {fields!r}")
    return cls(**{k: _dec(v) for k, v in fields.items()})


def _dtype(name) -> D.Dtype:
    if not isinstance(name, str) or name not in D._BY_NAME:
        raise ValueError(f"unknown dtype {name!r}")
    return D.from_name(name)


def _shape(s) -> tuple:
    if not isinstance(s, list) or not all(type(d) is int and d >= 0 for d in s):
        raise ValueError(f"bad shape {s!r}")
    return tuple(s)


def _aval(x):
    return [list(x.shape), x.dtype.name]


# -- tracing ---------------------------------------------------------------------------------
def _trace(fun, pos, kw, shapeless, name):
    """The simplified tape of `fun` on placeholders like `pos` + `kw` (kw in sorted order)."""
    real = pos + [kw[k] for k in sorted(kw)]
    phs = [placeholder(x) for x in real]
    tags = [p._idx for p in phs]
    n = len(pos)
    with compile_trace(name, shapeless):
        out = fun(*phs[:n], **dict(zip(sorted(kw), phs[n:])))
        outs = _flat_outputs(out)
    tape = capture(phs, outs, real, name, tags).copy()
    for p in pipeline.passes(("simplify",)):
        tape = p.run(tape)
    return tape


def _groups(tape):
    """Each node of the tape once: (representative, outputs in output-index order)."""
    i, nodes = 0, tape.nodes
    while i < len(nodes):
        a = nodes[i]
        k = len(a._siblings) if a._siblings is not None else 1
        yield a, sorted(nodes[i:i + k], key=lambda s: s._idx)
        i += k


class _Constants:
    """The file's constants, shared by its traces: one per captured array (by identity; the
    arrays are held so that identities stay valid)."""

    def __init__(self):
        self.index = {}
        self.arrays = []

    def ref(self, x) -> int:
        k = self.index.get(id(x))
        if k is None:
            if x._data is None:
                raise ValueError("[export_function] The traced graph reads an array that is "
                                 "neither an input, a constant nor computed in the graph.")
            k = self.index[id(x)] = len(self.arrays)
            self.arrays.append(x)
        return -1 - k


def _record(tape, n_args, keys, consts) -> dict:
    slot = {id(p): k for k, p in enumerate(tape.inputs)}

    def ref(x):
        r = slot.get(id(x))
        return consts.ref(x) if r is None else r

    nodes = []
    for a, outs in _groups(tape):
        rec = {"p": encode_primitive(a._prim), "in": [ref(x) for x in a._inputs],
               "out": [_aval(o) for o in outs]}
        for o in outs:
            slot[id(o)] = len(slot)
        nodes.append(rec)
    ins = tape.inputs
    return {"args": [_aval(x) for x in ins[:n_args]],
            "kwargs": [[k] + _aval(x) for k, x in zip(keys, ins[n_args:])],
            "nodes": nodes, "outputs": [ref(o) for o in tape.outputs]}


# -- the file --------------------------------------------------------------------------------
def _index_bytes(index) -> bytes:
    body = json.dumps(index, separators=(",", ":"), allow_nan=False).encode()
    return body + struct.pack("<Q", len(body)) + TAIL


def _new_index(shapeless, metadata) -> dict:
    return {"format": FORMAT, "version": VERSION, "byteorder": sys.byteorder,
            "shapeless": bool(shapeless), "metadata": metadata, "constants": [],
            "functions": []}


def _blob(x) -> bytes:
    return np.ascontiguousarray(x._data).reshape(-1).view(np.uint8).tobytes()


# -- export ----------------------------------------------------------------------------------
class FunctionExporter:
    """Exports several traces (input signatures) of one function to one file; made by
    `mx.exporter`, used as a context manager or closed with `close()`."""

    def __init__(self, file, fun, shapeless=False, metadata=None, callback=None):
        if metadata is not None and not isinstance(metadata, str):
            raise TypeError("[export_function] metadata must be a str (for example JSON "
                            f"text) or None, got {type(metadata).__name__}.")
        if not callable(fun):
            raise TypeError(f"[export_function] Expected a callable, got {type(fun).__name__}.")
        self._fun = fun
        self._name = getattr(fun, "__name__", None) or type(fun).__name__
        self._shapeless = bool(shapeless)
        self._callback = callback
        self._closed = False
        self._consts = _Constants()
        self._sigs = []
        self._path = None
        if callback is None:
            self._path = _fspath(file, "export_function")
            self._index = _new_index(shapeless, metadata or "")
            self._index_pos = len(MAGIC)
            try:
                with open(self._path, "wb") as f:
                    f.write(MAGIC + _index_bytes(self._index))
            except OSError as e:
                raise RuntimeError(f"[export_function] Failed to open {self._path}: {e}") \
                    from None

    def close(self) -> None:
        """No more traces; the file is complete after every call, so this only releases."""
        self._closed = True
        self._consts = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type=None, exc_value=None, traceback=None):
        self.close()

    def __call__(self, *args, **kwargs) -> None:
        pos, kw = split_inputs(args, kwargs, "[export_function]")
        if self._closed:
            raise RuntimeError("[export_function] Attempting to write after exporting is "
                               "closed.")
        keys = sorted(kw)
        flat = pos + [kw[k] for k in keys]
        sig = (len(pos), keys, [(x.dtype, x.shape) for x in flat])
        if any(_same(sig, s, self._shapeless) for s in self._sigs):
            raise RuntimeError("[export_function] Attempting to export a function twice with "
                               "the same signature is not allowed.")
        tape = _trace(self._fun, pos, kw, self._shapeless, self._name)
        if self._callback is not None:
            _report(self._callback, tape, len(pos), keys)
        else:
            self._append(_record(tape, len(pos), keys, self._consts))
        self._sigs.append(sig)

    def _append(self, rec) -> None:
        """Write the new constants over the old index, then the index with `rec` added."""
        old = self._index  # replaced only once the file is written
        index = dict(old, constants=list(old["constants"]), functions=old["functions"] + [rec])
        consts = self._consts.arrays
        with open(self._path, "r+b") as f:
            f.seek(self._index_pos)
            pos = self._index_pos
            for x in consts[len(index["constants"]):]:
                pad = -pos % _ALIGN
                data = _blob(x)
                f.write(b"\0" * pad + data)
                index["constants"].append({"shape": list(x.shape), "dtype": x.dtype.name,
                                           "offset": pos + pad, "nbytes": len(data)})
                pos += pad + len(data)
            f.write(_index_bytes(index))
            f.truncate()
        self._index, self._index_pos = index, pos


def _same(a, b, shapeless) -> bool:
    """Would calls with signatures `a` and `b` pick the same trace? (MLX's match)"""
    if a[0] != b[0] or a[1] != b[1] or len(a[2]) != len(b[2]):
        return False
    return all(da is db and (len(sa) == len(sb) if shapeless else sa == sb)
               for (da, sa), (db, sb) in zip(a[2], b[2]))


def exporter(file: str | os.PathLike, fun: Callable, *, shapeless: bool = False,
             metadata: dict | None = None) -> FunctionExporter:
    """A FunctionExporter writing traces of `fun` to `file` (MLX's `mx.exporter`)."""
    return FunctionExporter(file, fun, shapeless, metadata)


def export_function(file_or_callback: str | os.PathLike | Callable, fun: Callable, *args: Any,
                    shapeless: bool = False, metadata: dict | None = None,
                    **kwargs: Any) -> None:
    """Trace `fun` on the example inputs and write the graph to a file, or describe it to a
    callback (MLX's `mx.export_function`; braze's own file format)."""
    if isinstance(file_or_callback, (str, os.PathLike)):
        ex = FunctionExporter(file_or_callback, fun, shapeless, metadata)
    else:
        if metadata:
            raise ValueError("[export_function] The metadata argument is only supported when "
                             "exporting to a file, not when using a callback.")
        if not callable(file_or_callback):
            raise TypeError("[export_function] Expected a file path or a callback, got "
                            f"{type(file_or_callback).__name__}.")
        ex = FunctionExporter(None, fun, shapeless, None, callback=file_or_callback)
    with ex:
        ex(*args, **kwargs)


# -- the callback form -----------------------------------------------------------------------
#: where the callback's "arguments" follow MLX's primitive state rather than braze's fields
_MLX_ARGUMENTS = {
    "Log": lambda p: [{"2": 0, "10": 1, "e": 2}[p.base]],  # MLX's enum Base {two, ten, e}
}


def _arguments(prim) -> list:
    fix = _MLX_ARGUMENTS.get(type(prim).__name__)
    if fix is not None:
        return fix(prim)
    encode_primitive(prim)  # the same refusal as for a file
    return [getattr(prim, f.name) for f in _stored_fields(type(prim))]


def _report(callback, tape, n_args, keys) -> None:
    """MLX's export callback: inputs, keyword inputs, outputs, constants, then one call per
    primitive in tape order."""
    names = {}

    def name(x):
        if id(x) not in names:
            names[id(x)] = _letters(len(names) + 1)
        return names[id(x)]

    def data(xs):
        return [(name(x), list(x.shape), x.dtype) for x in xs]

    ins = tape.inputs
    callback({"type": "inputs", "inputs": data(ins)})
    callback({"type": "keyword_inputs",
              "keywords": [(k, name(x)) for k, x in zip(keys, ins[n_args:])]})
    callback({"type": "outputs", "outputs": data(tape.outputs)})
    inside = {id(x) for x in ins} | {id(a) for a in tape.nodes}
    consts, seen = [], set()
    for x in [x for a in tape.nodes for x in a._inputs] + tape.outputs:
        if id(x) not in inside and id(x) not in seen:
            seen.add(id(x))
            consts.append((name(x), x))
    callback({"type": "constants", "constants": consts})
    for a, outs in _groups(tape):
        callback({"type": "primitive", "inputs": data(a._inputs), "outputs": data(outs),
                  "name": a._prim.name, "arguments": _arguments(a._prim)})


# -- import ----------------------------------------------------------------------------------
class _Function:
    """One trace read back: its input signature and its tape."""

    __slots__ = ("n_args", "keys", "avals", "tape", "_plan")

    def __init__(self, n_args, keys, avals, tape):
        self.n_args, self.keys, self.avals, self.tape = n_args, keys, avals, tape
        self._plan = None

    def matches(self, flat, n_args, keys, shapeless) -> bool:
        if n_args != self.n_args or keys != self.keys or len(flat) != len(self.avals):
            return False
        return all(x.dtype is d and (x.ndim == len(s) if shapeless else x.shape == s)
                   for x, (s, d) in zip(flat, self.avals))

    def describe(self) -> str:
        lines = [f"  {self.n_args} positional and {len(self.keys)} keyword inputs:"]
        names = [str(i + 1) for i in range(self.n_args)] + [repr(k) for k in self.keys]
        lines += [f"    {n}: {list(s)} {d.name}" for n, (s, d) in zip(names, self.avals)]
        return "\n".join(lines)

    def run(self, flat, shapeless, name) -> list:
        if shapeless or TraceState.depth:
            return replay(self.tape, flat, shapeless, None, name)
        if self._plan is None:
            self._plan = ReplayPlan(self.tape)
        return self._plan.run(list(flat))


class ImportedFunction:
    """What `mx.import_function` returns: called like the exported function (or with one
    tuple/list and/or one dict of arrays), returns a tuple of arrays."""

    def __init__(self, path, functions, shapeless, metadata):
        self._path = path
        self._functions = functions
        self._shapeless = shapeless
        self.metadata = metadata

    def __repr__(self):
        return f"<imported function {self._path!r} ({len(self._functions)} traces)>"

    def __call__(self, *args, **kwargs):
        pos, kw = split_inputs(args, kwargs, "[import_function::call]")
        keys = sorted(kw)
        flat = pos + [kw[k] for k in keys]
        for fn in self._functions:
            if fn.matches(flat, len(pos), keys, self._shapeless):
                break
        else:
            raise ValueError(self._no_match(pos, kw))
        outs = fn.run(flat, self._shapeless, os.path.basename(self._path))
        for i, o in enumerate(outs):  # never hand out the stored constant itself
            if o._prim is None and o._data is not None and not any(o is x for x in flat):
                outs[i] = bind(_COPY, (o,))
        return tuple(outs)

    def _no_match(self, pos, kw) -> str:
        lines = ["[import_function::call] No imported function found which matches the given "
                 "positional and keyword arguments. Possible functions include:"]
        lines += [f.describe() for f in self._functions] or ["  (none)"]
        lines.append(f"Called with {len(pos)} positional and {len(kw)} keyword inputs:")
        lines += [f"    {i + 1}: {list(x.shape)} {x.dtype.name}" for i, x in enumerate(pos)]
        lines += [f"    {k!r}: {list(x.shape)} {x.dtype.name}" for k, x in kw.items()]
        return "\n".join(lines)


def import_function(file: str | os.PathLike, return_metadata: bool = False) -> Any:
    """Read a function written by `mx.export_function` / `mx.exporter` (braze's format only).
    Returns the callable, or (callable, metadata string) with `return_metadata=True`."""
    path = _fspath(file, "import_function")
    try:
        f = open(path, "rb")
    except OSError as e:
        raise RuntimeError(f"[import_function] Failed to open {path}: {e}") from None
    with f:
        index, size = _read_index(f, path)
        try:
            consts = [_read_constant(f, c, size) for c in index["constants"]]
            functions = [_rebuild(r, consts) for r in index["functions"]]
            shapeless, metadata = index["shapeless"], index["metadata"]
            if not isinstance(shapeless, bool) or not isinstance(metadata, str):
                raise ValueError("bad header")
        except (ValueError, TypeError, KeyError, IndexError, AttributeError,
                OverflowError) as e:
            raise _corrupt(path, e) from None
    fn = ImportedFunction(path, functions, shapeless, metadata)
    return (fn, metadata) if return_metadata else fn


def _fspath(file, op) -> str:
    try:
        return os.fspath(file)
    except TypeError:
        raise TypeError(f"[{op}] Expected a file path (str or os.PathLike), got "
                        f"{type(file).__name__}.") from None


def _corrupt(path, why) -> ValueError:
    if isinstance(why, KeyError):
        why = f"no entry {why}"
    return ValueError(f"[import_function] {path} is not a valid braze function file ({why}). "
                      "Only files written by braze's mx.export_function can be imported; "
                      "MLX's .mlxfn files are not readable by braze.")


def _read_index(f, path):
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(0)
    if size < len(MAGIC) + 8 + len(TAIL) or f.read(len(MAGIC)) != MAGIC:
        raise _corrupt(path, "no braze function header")
    f.seek(size - 8 - len(TAIL))
    (n,) = struct.unpack("<Q", f.read(8))
    if f.read(len(TAIL)) != TAIL or n > size - len(MAGIC) - 8 - len(TAIL):
        raise _corrupt(path, "truncated or damaged index")
    start = size - 8 - len(TAIL) - n
    f.seek(start)
    try:
        index = json.loads(f.read(n).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _corrupt(path, f"damaged index: {e}") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise _corrupt(path, "not a braze function index")
    if not isinstance(index.get("version"), int) or index["version"] > VERSION:
        raise ValueError(f"[import_function] {path} was written in format version "
                         f"{index.get('version')!r}; this braze reads versions up to "
                         f"{VERSION}.")
    if index.get("byteorder") != sys.byteorder:
        raise _corrupt(path, f"byte order {index.get('byteorder')!r}")
    return index, start


def _read_constant(f, c, limit) -> array:
    shape, dtype = _shape(c["shape"]), _dtype(c["dtype"])
    offset, nbytes = c["offset"], c["nbytes"]
    if (type(offset) is not int or type(nbytes) is not int or offset < len(MAGIC)
            or nbytes != math.prod(shape) * dtype.size or offset + nbytes > limit):
        raise ValueError(f"bad constant record {c!r}")
    data = np.empty(shape, dtype.np_dtype)
    f.seek(offset)
    if nbytes and f.readinto(memoryview(data.reshape(-1).view(np.uint8))) != nbytes:
        raise ValueError("constant data ends early")
    out = object.__new__(array)
    out._init_buffer(data)
    return out


def _get(vals, consts, r):
    if type(r) is not int or not -len(consts) <= r < len(vals):
        raise ValueError(f"bad reference {r!r}")
    return consts[-1 - r] if r < 0 else vals[r]


def _rebuild(rec, consts) -> _Function:
    """A tape from a function record, every node's avals checked against its primitive."""
    args = [(_shape(s), _dtype(d)) for s, d in rec["args"]]
    kwargs = [(k, _shape(s), _dtype(d)) for k, s, d in rec["kwargs"]]
    keys = [k for k, _, _ in kwargs]
    if not all(isinstance(k, str) for k in keys) or keys != sorted(set(keys)):
        raise ValueError("bad keyword names")
    avals = args + [(s, d) for _, s, d in kwargs]
    inputs = [node(s, d, None, ()) for s, d in avals]
    vals, nodes = list(inputs), []
    for n in rec["nodes"]:
        prim = decode_primitive(n["p"])
        ins = tuple(_get(vals, consts, r) for r in n["in"])
        stored = [(_shape(s), _dtype(d)) for s, d in n["out"]]
        got = [(tuple(s), d) for s, d in prim.abstract_eval(*ins)]
        if got != stored:
            raise ValueError(f"{prim.name} gives {got}, the file says {stored}")
        outs = [node(s, d, prim, ins) for s, d in got]
        if len(outs) > 1:
            group = tuple(outs)
            for i, o in enumerate(outs):
                o._siblings, o._idx = group, i
        nodes += outs
        vals += outs
    outputs = [_get(vals, consts, r) for r in rec["outputs"]]
    return _Function(len(args), keys, avals, Tape(inputs, outputs, nodes))
