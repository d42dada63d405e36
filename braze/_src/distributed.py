"""`mx.distributed`: MLX's communication API over MPI (mpi4py), or a single-process group.

What a script sees (MLX's names and signatures)::

    group = mx.distributed.init()            # the world under mpirun, else a group of size 1
    x = mx.distributed.all_sum(x, group=group)
    y = mx.distributed.all_gather(x)         # concatenated along axis 0 over the ranks

A `Group` is a handle over a `Backend`, the communicator that moves NumPy buffers. With more
than one process the collectives are lazy primitives (`prims/distributed.py`) that call it when
evaluated, so they run in the same `mx.eval` as other work, differentiate, vmap and compile
(opaque nodes). With one process they return their input, as in MLX.

Backends: "mpi" (mpi4py over whichever MPI it was built with; `pip install braze[mpi]` brings
the MPICH wheel) when the process was started by `mpirun`/`mpiexec` (or `python -m
braze.launch`) with a world of more than one process; otherwise `init()` falls back to the
singleton group (`strict=True` raises instead). A new backend subclasses `Backend` and calls
`register_backend`.
"""
from __future__ import annotations

import importlib.util
import os
import threading
import warnings
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from . import memory
from .array import array
from .dtypes import Dtype, is_half
from .ops._typing import ArrayLike, StreamOrDevice
from .prims import distributed as P
from .prims.base import bind

__all__ = ["Group", "init", "is_available", "all_sum", "all_max", "all_min", "all_gather",
           "sum_scatter", "send", "recv", "recv_like"]

_BACKEND_NAMES = ("any", "mpi", "ring", "nccl", "jaccl")


# -- backends ---------------------------------------------------------------------------------
class Backend:
    """A communicator. It receives C-contiguous NumPy buffers (the evaluated inputs of the
    collective primitives) and every rank of its group calls it in the same order.
    `name` identifies the backend ("singleton" for the fallback)."""

    name = "abstract"

    def rank(self) -> int:
        raise NotImplementedError

    def size(self) -> int:
        raise NotImplementedError

    def split(self, color: int, key: int) -> "Backend":
        raise NotImplementedError

    def all_reduce(self, x: np.ndarray, out: np.ndarray, reduce_type: str) -> None:
        """Write the elementwise "sum", "max" or "min" of x over the group into `out` (which
        may be x itself)."""
        raise NotImplementedError

    def all_gather(self, x: np.ndarray) -> np.ndarray:
        """Every rank's x, stacked: shape (size,) + x.shape."""
        raise NotImplementedError

    def sum_scatter(self, x: np.ndarray) -> np.ndarray:
        """This rank's part of axis 0 of the sum of x over the group."""
        raise NotImplementedError

    def send(self, x: np.ndarray, dst: int) -> None:
        raise NotImplementedError

    def recv(self, shape: tuple, dtype: np.dtype, src: int) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self):
        return f"<{self.name} rank {self.rank()} of {self.size()}>"


class SingletonBackend(Backend):
    """One process: the collectives never reach it (they return their input)."""

    name = "singleton"

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return 1

    def split(self, color, key):
        raise RuntimeError("Cannot split the distributed group further.")


def _widened(x: np.ndarray) -> np.ndarray:
    """x in float32, in a buffer from braze's buffer cache (fresh pages cost more than MPI)."""
    wide = memory.empty(x.shape, np.float32)
    np.copyto(wide, x)
    return wide


def _lex_fold(stacked: np.ndarray, reduce_type: str) -> np.ndarray:
    """MLX's complex max/min: by real part, then imaginary part."""
    acc = stacked[0].copy()
    for y in stacked[1:]:
        if reduce_type == "max":
            take = (y.real > acc.real) | ((y.real == acc.real) & (y.imag > acc.imag))
        else:
            take = (y.real < acc.real) | ((y.real == acc.real) & (y.imag < acc.imag))
        acc = np.where(take, y, acc)
    return acc


class MPIBackend(Backend):
    """An mpi4py communicator. Gathers and messages move raw bytes (any dtype); reductions use
    MPI's typed ops, half precision in float32, bool as logical or/and, complex max/min by a
    gather and MLX's lexicographic order."""

    name = "mpi"

    def __init__(self, comm, mpi):
        self._comm, self._mpi = comm, mpi
        self._rank, self._size = comm.Get_rank(), comm.Get_size()

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def split(self, color, key):
        return MPIBackend(self._comm.Split(color, key if key >= 0 else self._rank), self._mpi)

    def _op(self, reduce_type, dtype):
        m = self._mpi
        if dtype == np.bool_:
            return m.LAND if reduce_type == "min" else m.LOR
        return {"sum": m.SUM, "max": m.MAX, "min": m.MIN}[reduce_type]

    def all_reduce(self, x, out, reduce_type):
        if is_half(x.dtype):  # in float32, rounded once: MLX rounds per add
            wide = _widened(x)
            self._comm.Allreduce(self._mpi.IN_PLACE, wide, self._op(reduce_type, wide.dtype))
            out[...] = wide
        elif x.dtype == np.complex64 and reduce_type != "sum":
            out[...] = _lex_fold(self.all_gather(x), reduce_type)
        else:
            src = self._mpi.IN_PLACE if out is x else x
            self._comm.Allreduce(src, out, self._op(reduce_type, x.dtype))

    def _bytes(self, x):
        return [x.reshape(-1).view(np.uint8), self._mpi.BYTE]

    def all_gather(self, x):
        out = memory.empty((self._size,) + x.shape, x.dtype)
        self._comm.Allgather(self._bytes(x), self._bytes(out))
        return out

    def sum_scatter(self, x):
        shape = (x.shape[0] // self._size,) + x.shape[1:]
        if is_half(x.dtype):  # in float32, rounded once: MLX rounds per add
            part = memory.empty(shape, np.float32)
            self._comm.Reduce_scatter_block(_widened(x), part, self._mpi.SUM)
            return part.astype(x.dtype)
        part = memory.empty(shape, x.dtype)
        self._comm.Reduce_scatter_block(x, part, self._op("sum", x.dtype))
        return part

    def send(self, x, dst):
        self._comm.Send(self._bytes(x), dest=dst, tag=0)

    def recv(self, shape, dtype, src):
        out = memory.empty(shape, dtype)
        self._comm.Recv(self._bytes(out), source=src, tag=self._mpi.ANY_TAG)
        return out


#: set by mpirun/mpiexec (MPICH's Hydra, Open MPI, PMIx launchers such as srun)
_LAUNCHER_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")


def _mpi_backend() -> Backend:
    # without a launcher there is no world to join: skip importing mpi4py (MPI_Init) at all
    if not any(v in os.environ for v in _LAUNCHER_VARS):
        raise RuntimeError("not started by mpirun (`python -m braze.launch -n N script.py` "
                           "starts N processes)")
    try:
        from mpi4py import MPI  # noqa: PLC0415  (MPI_Init happens at this import)
    except ImportError as e:
        raise RuntimeError(f"mpi4py is not installed ({e}): pip install 'braze[mpi]'") from None
    if MPI.COMM_WORLD.Get_size() <= 1:
        raise RuntimeError("[mpi] The world has a single process. Launch with mpirun to "
                           "initialize the mpi backend.")
    return MPIBackend(MPI.COMM_WORLD, MPI)


_FACTORIES: Dict[str, tuple] = {}


def register_backend(name: str, factory: Callable[[], Backend],
                     available: Optional[Callable[[], bool]] = None) -> None:
    """Make backend `name` available to `init(backend=name)` (and to `backend="any"`, tried in
    registration order). `factory()` returns a `Backend` or raises RuntimeError; `available()`
    answers `is_available(name)` without starting it (default: always)."""
    if name in ("any", "singleton"):
        raise ValueError(f"[distributed] '{name}' is reserved and cannot be registered.")
    _FACTORIES[name] = (factory, available or (lambda: True))


register_backend("mpi", _mpi_backend, lambda: importlib.util.find_spec("mpi4py") is not None)


# -- groups -----------------------------------------------------------------------------------
class Group:
    """A group of processes that communicate (MLX's `mlx.core.distributed.Group`)."""

    __slots__ = ("_backend", "_gid")

    def __init__(self, *args, **kwargs):
        raise TypeError("mx.distributed.Group: no constructor defined! "
                        "Use mx.distributed.init() or Group.split().")

    @classmethod
    def _make(cls, backend: Backend) -> "Group":
        g = object.__new__(cls)
        g._backend = backend
        g._gid = P.register_comm(backend)
        return g

    def rank(self) -> int:
        """The rank of this process in the group."""
        return self._backend.rank()

    def size(self) -> int:
        """The number of processes in the group."""
        return self._backend.size()

    def split(self, color: int, key: int = -1) -> "Group":
        """Split the group into subgroups by `color` (every member must call it); `key` orders
        the ranks of the new group (negative: keep this group's rank order). A singleton group
        cannot be split."""
        if not isinstance(color, int) or isinstance(color, bool):
            raise TypeError(f"[distributed] split: color must be an int, got {color!r}.")
        if not isinstance(key, int) or isinstance(key, bool):
            raise TypeError(f"[distributed] split: key must be an int, got {key!r}.")
        return Group._make(self._backend.split(color, key))

    def __repr__(self):
        return f"Group(rank={self.rank()}, size={self.size()}, backend={self._backend.name!r})"


_lock = threading.Lock()
_GLOBAL: Optional[Group] = None


def is_available(backend: str = "any") -> bool:
    """Whether a multi-process backend is installed ("mpi": mpi4py is importable). The
    singleton fallback does not count, as in MLX."""
    _check_backend_name(backend)
    if backend == "any":
        return any(av() for _, av in _FACTORIES.values())
    return backend in _FACTORIES and _FACTORIES[backend][1]()


def _check_backend_name(backend):
    if not isinstance(backend, str):
        raise TypeError(f"[distributed] backend must be a string, got {backend!r}.")
    if backend not in _BACKEND_NAMES and backend not in _FACTORIES:
        valid = ", ".join(repr(b) for b in list(_BACKEND_NAMES) + list(_FACTORIES))
        raise ValueError(f"[distributed] The only valid values for backend are {valid} "
                         f"but {backend!r} was provided.")


def _check_factory(backend, all_gather_factory):
    if all_gather_factory is None:
        return
    if backend != "jaccl":
        raise ValueError("all_gather_factory is only supported with backend='jaccl'.")
    if not callable(all_gather_factory):
        raise TypeError("all_gather_factory must be callable.")


def init(strict: bool = False, backend: str = "any", *,
         all_gather_factory: Optional[Callable] = None) -> Group:
    """Initialise communication and return the global group.

    Tries `backend` (or, with "any", every registered backend in order). The first success
    becomes the global group returned by later calls. When none succeeds: `strict=True` raises
    RuntimeError; otherwise a singleton group (rank 0, size 1) is returned.
    `all_gather_factory` is MLX's jaccl side channel (accepted with backend="jaccl" only;
    braze has no jaccl backend).
    """
    global _GLOBAL
    _check_backend_name(backend)
    _check_factory(backend, all_gather_factory)
    with _lock:
        if _GLOBAL is not None and _GLOBAL._backend.name != "singleton":
            if backend in ("any", _GLOBAL._backend.name):
                return _GLOBAL
        names = list(_FACTORIES) if backend == "any" else [backend]
        errors = []
        for name in names:
            if name not in _FACTORIES:
                errors.append(f"{name}: not available in braze")
                continue
            try:
                be = _FACTORIES[name][0]()
            except RuntimeError as e:
                errors.append(f"{name}: {e}")
                continue
            _GLOBAL = Group._make(be)
            return _GLOBAL
        if strict:
            why = f" ({'; '.join(errors)})" if errors else " (no multi-process backend installed)"
            raise RuntimeError(f"[distributed] Couldn't initialize any backend{why}")
        _warn_if_launched(errors)
        if _GLOBAL is None:
            _GLOBAL = Group._make(SingletonBackend())
        return _GLOBAL


def _warn_if_launched(errors):
    """mpirun started several processes but none can join them (mpi4py missing, say): each
    would silently train alone."""
    sizes = [os.environ.get(v, "") for v in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")]
    n = max([int(v) for v in sizes if v.isdigit()] or [1])
    if n > 1:
        warnings.warn(f"[distributed] This process is one of {n} started by mpirun, but no "
                      f"backend could start ({'; '.join(errors)}): it runs alone.",
                      RuntimeWarning, stacklevel=3)


def _group(group, op: str) -> Group:
    if group is None:
        return init()
    if not isinstance(group, Group):
        raise TypeError(f"[{op}] group must be an mx.distributed.Group or None, "
                        f"got {type(group).__name__}.")
    return group


def _as_array(x, op: str) -> array:
    if isinstance(x, array):
        return x
    try:
        return array(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"[{op}] expected an array, got {type(x).__name__}: {e}") from None


def _rank_arg(r, group: Group, what: str, op: str) -> int:
    if not isinstance(r, int) or isinstance(r, bool):
        raise TypeError(f"[{op}] {what} must be an int, got {r!r}.")
    n = group.size()
    if n == 1:
        raise ValueError(f"Cannot {op} {'to' if op == 'send' else 'from'} a singleton group")
    if not 0 <= r < n:
        raise ValueError(f"[{op}] Invalid {what}={r} for a group of size {n}.")
    return r


# -- collectives (stream= is accepted and ignored: communication runs on the CPU) ---------------
def _all_reduce(x, group, reduce_type: str, op: str) -> array:
    g = _group(group, op)
    x = _as_array(x, op)
    if g.size() == 1:
        return x
    return bind(P.AllReduce(g._gid, reduce_type), (x,))


def all_sum(x: ArrayLike, *, group: Optional[Group] = None, stream: StreamOrDevice = None) -> array:
    """Sum `x` over every process of the group; every process gets the result. Its vjp is the
    identity (MLX's rule: each rank's cotangent stays on that rank)."""
    return _all_reduce(x, group, "sum", "all_sum")


def all_max(x: ArrayLike, *, group: Optional[Group] = None, stream: StreamOrDevice = None) -> array:
    """Elementwise maximum of `x` over the group (complex: by real, then imaginary part)."""
    return _all_reduce(x, group, "max", "all_max")


def all_min(x: ArrayLike, *, group: Optional[Group] = None, stream: StreamOrDevice = None) -> array:
    """Elementwise minimum of `x` over the group (complex: by real, then imaginary part)."""
    return _all_reduce(x, group, "min", "all_min")


def all_gather(x: ArrayLike, *, group: Optional[Group] = None,
               stream: StreamOrDevice = None) -> array:
    """Concatenate `x` from every process along the first axis, in rank order (scalars are
    stacked). Its vjp is this rank's slice of the cotangent."""
    g = _group(group, "all_gather")
    x = _as_array(x, "all_gather")
    if g.size() == 1:
        return x
    return bind(P.AllGather(g._gid), (x,))


def sum_scatter(x: ArrayLike, *, group: Optional[Group] = None,
                stream: StreamOrDevice = None) -> array:
    """Sum `x` over the group and give rank r the r-th of `size` equal parts of the first axis
    (which the group size must divide)."""
    g = _group(group, "sum_scatter")
    x = _as_array(x, "sum_scatter")
    n = g.size()
    if n == 1:
        return x
    if x.ndim == 0 or x.shape[0] % n:
        raise ValueError(f"[sum_scatter] Invalid shape={x.shape} for a group of size {n}. The "
                         "first dimension (axis 0) must be divisible by the group size.")
    return bind(P.ReduceScatter(g._gid), (x,))


def send(x: ArrayLike, dst: int, *, group: Optional[Group] = None,
         stream: StreamOrDevice = None) -> array:
    """Send `x` to rank `dst` when the result (equal to `x`) is evaluated."""
    g = _group(group, "send")
    x = _as_array(x, "send")
    dst = _rank_arg(dst, g, "dst", "send")
    return bind(P.Send(g._gid, dst, P.next_uid()), (x,))


def recv(shape: Sequence[int], dtype: Dtype, src: int, *, group: Optional[Group] = None,
         stream: StreamOrDevice = None) -> array:
    """Receive an array of `shape` and `dtype` from rank `src` when it is evaluated."""
    g = _group(group, "recv")
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"[recv] shape must be a sequence of ints, got {shape!r}.") from None
    if not isinstance(dtype, Dtype):
        raise TypeError(f"[recv] dtype must be an mx.Dtype, got {dtype!r}.")
    src = _rank_arg(src, g, "src", "recv")
    return bind(P.Recv(g._gid, src, shape, dtype, P.next_uid()), ())


def recv_like(x: ArrayLike, src: int, *, group: Optional[Group] = None,
              stream: StreamOrDevice = None) -> array:
    """Receive an array shaped and typed like `x` from rank `src`."""
    x = _as_array(x, "recv_like")
    return recv(x.shape, x.dtype, src, group=group, stream=stream)
