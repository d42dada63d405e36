"""`mx.distributed`: MLX's communication API, with a single-process group by default.

What a script sees (MLX's names and signatures)::

    group = mx.distributed.init()            # the global group; size() == 1 here
    x = mx.distributed.all_sum(x, group=group)
    y = mx.distributed.all_gather(x)         # concatenated along axis 0 over the ranks

Design: a `Group` is a thin handle (rank, size) over a `Backend` object that carries out the
collectives. Today the only backend is `SingletonBackend`: one process, so every collective is
the identity and point-to-point communication is an error, exactly as MLX behaves when no
distributed backend could be initialised (`init(strict=False)` falls back to a singleton group).

Adding a multi-process backend later (e.g. over `torch.distributed`'s gloo, MPI through mpi4py,
or plain sockets) means:

1. subclass `Backend`, implementing `all_sum`, `all_max`, `all_min`, `all_gather`,
   `sum_scatter`, `send`, `recv` on NumPy buffers (they receive *evaluated* arrays), `split`, and
   `rank`/`size`;
2. `register_backend("name", factory)` where `factory()` returns the backend or raises
   `RuntimeError` when it cannot start (no launcher environment, peers unreachable);
3. if collectives must be traced by `compile` or differentiated, wrap them as primitives with
   `vjp` rules (all_sum's vjp is all_sum of the cotangent; all_gather's is the slice of this
   rank). The singleton path needs none of that: it returns its input unchanged, so grad, vmap
   and compile see straight through it.

`average_gradients` (MLX's `mlx.nn.utils.average_gradients`) lives here, below `braze.nn`, so
`braze.nn.utils` can re-export it.
"""
from __future__ import annotations

import threading
from functools import reduce
from typing import Any, Callable, Dict, Optional, Sequence

from . import tree as T
from .array import array
from .dtypes import Dtype
from .ops._typing import ArrayLike, StreamOrDevice

__all__ = ["Group", "init", "is_available", "all_sum", "all_max", "all_min", "all_gather",
           "sum_scatter", "send", "recv", "recv_like"]

_BACKEND_NAMES = ("any", "mpi", "ring", "nccl", "jaccl")


# -- backends ---------------------------------------------------------------------------------
class Backend:
    """What a communication backend provides. Arrays passed in are braze arrays; results are
    braze arrays. `name` identifies the backend ("singleton" for the fallback)."""

    name = "abstract"

    def rank(self) -> int:
        raise NotImplementedError

    def size(self) -> int:
        raise NotImplementedError

    def split(self, color: int, key: int) -> "Backend":
        raise NotImplementedError

    def all_sum(self, x: array) -> array:
        raise NotImplementedError

    def all_max(self, x: array) -> array:
        raise NotImplementedError

    def all_min(self, x: array) -> array:
        raise NotImplementedError

    def all_gather(self, x: array) -> array:
        raise NotImplementedError

    def sum_scatter(self, x: array) -> array:
        raise NotImplementedError

    def send(self, x: array, dst: int) -> array:
        raise NotImplementedError

    def recv(self, shape: tuple, dtype: Dtype, src: int) -> array:
        raise NotImplementedError


class SingletonBackend(Backend):
    """One process: reductions and gathers return their input; send/recv are errors (MLX:
    "Cannot send to a singleton group")."""

    name = "singleton"

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return 1

    def split(self, color, key):
        raise RuntimeError("Cannot split the distributed group further.")

    def all_sum(self, x):
        return x

    all_max = all_min = all_gather = sum_scatter = all_sum

    def send(self, x, dst):
        raise ValueError("Cannot send to a singleton group")

    def recv(self, shape, dtype, src):
        raise ValueError("Cannot recv from a singleton group")


_FACTORIES: Dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make backend `name` available to `init(backend=name)` (and to `backend="any"`, tried in
    registration order). `factory()` returns a `Backend` or raises RuntimeError."""
    if name in ("any", "singleton"):
        raise ValueError(f"[distributed] '{name}' is reserved and cannot be registered.")
    _FACTORIES[name] = factory


# -- groups -----------------------------------------------------------------------------------
class Group:
    """A group of processes that communicate (MLX's `mlx.core.distributed.Group`)."""

    __slots__ = ("_backend",)

    def __init__(self, *args, **kwargs):
        raise TypeError("mx.distributed.Group: no constructor defined! "
                        "Use mx.distributed.init() or Group.split().")

    @classmethod
    def _make(cls, backend: Backend) -> "Group":
        g = object.__new__(cls)
        g._backend = backend
        return g

    def rank(self) -> int:
        """The rank of this process in the group."""
        return self._backend.rank()

    def size(self) -> int:
        """The number of processes in the group."""
        return self._backend.size()

    def split(self, color: int, key: int = -1) -> "Group":
        """Split the group into subgroups by `color`; `key` orders the ranks of the new group
        (negative: keep this group's rank order). A singleton group cannot be split."""
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
    """Whether a multi-process backend can be initialised. The singleton fallback does not
    count, as in MLX: with no backend registered this is False and `init()` still works."""
    _check_backend_name(backend)
    if backend == "any":
        return bool(_FACTORIES)
    return backend in _FACTORIES


def _check_backend_name(backend):
    if not isinstance(backend, str):
        raise TypeError(f"[distributed] backend must be a string, got {backend!r}.")
    if backend not in _BACKEND_NAMES and backend not in _FACTORIES:
        valid = ", ".join(repr(b) for b in list(_BACKEND_NAMES) + list(_FACTORIES))
        raise ValueError(f"[distributed] The only valid values for backend are {valid} "
                         f"but {backend!r} was provided.")


def init(strict: bool = False, backend: str = "any") -> Group:
    """Initialise communication and return the global group.

    Tries `backend` (or, with "any", every registered backend in order). The first success
    becomes the global group returned by later calls. When none succeeds: `strict=True` raises
    RuntimeError; otherwise a singleton group (rank 0, size 1) is returned.
    """
    global _GLOBAL
    _check_backend_name(backend)
    with _lock:
        if _GLOBAL is not None and _GLOBAL._backend.name != "singleton":
            if backend in ("any", _GLOBAL._backend.name):
                return _GLOBAL
        names = list(_FACTORIES) if backend == "any" else [backend]
        errors = []
        for name in names:
            factory = _FACTORIES.get(name)
            if factory is None:
                errors.append(f"{name}: not available in braze")
                continue
            try:
                be = factory()
            except RuntimeError as e:
                errors.append(f"{name}: {e}")
                continue
            _GLOBAL = Group._make(be)
            return _GLOBAL
        if strict:
            why = f" ({'; '.join(errors)})" if errors else " (no multi-process backend installed)"
            raise RuntimeError(f"[distributed] Couldn't initialize any backend{why}")
        if _GLOBAL is None:
            _GLOBAL = Group._make(SingletonBackend())
        return _GLOBAL


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
    if n > 1 and not 0 <= r < n:
        raise ValueError(f"[{op}] Invalid {what} {r} for a group of size {n}.")
    return r


# -- collectives (stream= is accepted and ignored) --------------------------------------------
def all_sum(x: ArrayLike, *, group: Optional[Group] = None, stream: StreamOrDevice = None) -> array:
    """Sum `x` over every process of the group; every process gets the result."""
    return _group(group, "all_sum")._backend.all_sum(_as_array(x, "all_sum"))


def all_max(x: ArrayLike, *, group: Optional[Group] = None, stream: StreamOrDevice = None) -> array:
    """Elementwise maximum of `x` over the group."""
    return _group(group, "all_max")._backend.all_max(_as_array(x, "all_max"))


def all_min(x: ArrayLike, *, group: Optional[Group] = None, stream: StreamOrDevice = None) -> array:
    """Elementwise minimum of `x` over the group."""
    return _group(group, "all_min")._backend.all_min(_as_array(x, "all_min"))


def all_gather(x: ArrayLike, *, group: Optional[Group] = None,
               stream: StreamOrDevice = None) -> array:
    """Concatenate `x` from every process along the first axis (rank order)."""
    return _group(group, "all_gather")._backend.all_gather(_as_array(x, "all_gather"))


def sum_scatter(x: ArrayLike, *, group: Optional[Group] = None,
                stream: StreamOrDevice = None) -> array:
    """Sum `x` over the group and give each process its slice of the first axis."""
    return _group(group, "sum_scatter")._backend.sum_scatter(_as_array(x, "sum_scatter"))


def send(x: ArrayLike, dst: int, *, group: Optional[Group] = None,
         stream: StreamOrDevice = None) -> array:
    """Send `x` to rank `dst`; returns an array to evaluate to perform the send."""
    g = _group(group, "send")
    x = _as_array(x, "send")
    return g._backend.send(x, _rank_arg(dst, g, "dst", "send"))


def recv(shape: Sequence[int], dtype: Dtype, src: int, *, group: Optional[Group] = None,
         stream: StreamOrDevice = None) -> array:
    """Receive an array of `shape` and `dtype` from rank `src`."""
    g = _group(group, "recv")
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"[recv] shape must be a sequence of ints, got {shape!r}.") from None
    if not isinstance(dtype, Dtype):
        raise TypeError(f"[recv] dtype must be an mx.Dtype, got {dtype!r}.")
    return g._backend.recv(shape, dtype, _rank_arg(src, g, "src", "recv"))


def recv_like(x: ArrayLike, src: int, *, group: Optional[Group] = None,
              stream: StreamOrDevice = None) -> array:
    """Receive an array shaped and typed like `x` from rank `src`."""
    x = _as_array(x, "recv_like")
    return recv(x.shape, x.dtype, src, group=group, stream=stream)


# -- nn.utils.average_gradients ----------------------------------------------------------------
def average_gradients(gradients: Any, group: Optional[Group] = None,
                      all_reduce_size: int = 32 * 1024 ** 2,
                      communication_stream=None) -> Any:
    """Average a tree of gradients over the processes of `group` (MLX's
    `mlx.nn.utils.average_gradients`). Small arrays of one dtype are concatenated into chunks
    of at least `all_reduce_size` bytes, one all_sum per chunk (<= 0: one all_sum per array).
    With a group of size 1 the gradients come back unchanged (the same object)."""
    from . import ops  # noqa: PLC0415  (the ops layer, imported lazily to keep import light)

    group = _group(group, "average_gradients")
    n = group.size()
    if n == 1:
        return gradients

    def avg(x):
        return all_sum(x, group=group, stream=communication_stream) / n

    if all_reduce_size <= 0:
        return T.tree_map(avg, gradients)
    flat = T.tree_flatten(gradients)
    if not flat:
        return gradients
    keys = [k for k, _ in flat]
    shapes = [g.shape for _, g in flat]
    sizes = [g.size for _, g in flat]
    dtypes = [g.dtype for _, g in flat]
    if not all(dt == dtypes[0] for dt in dtypes):
        return average_gradients(gradients, group, 0, communication_stream)
    groups, cur, cur_bytes = [], [], 0
    for i in range(len(keys)):
        cur.append(i)
        cur_bytes += sizes[i] * dtypes[0].size
        if cur_bytes >= all_reduce_size:
            groups.append(cur)
            cur, cur_bytes = [], 0
    if cur:
        groups.append(cur)
    out = []
    for grp in groups:
        idx = reduce(lambda acc, j: acc + [acc[-1] + sizes[j]], grp, [0])
        big = avg(ops.concatenate([flat[i][1].reshape(-1) for i in grp]))
        parts = ops.split(big, idx[1:-1])
        out.extend((keys[j], parts[i].reshape(shapes[j])) for i, j in enumerate(grp))
    return T.tree_unflatten(out)
