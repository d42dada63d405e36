"""Primitives: the collectives of `mx.distributed` (MLX's AllReduce, AllGather, ReduceScatter,
Send, Recv).

A primitive names its group by an int handle, the key of the group's communicator in `COMMS`
(`_src/distributed.py` registers one per group), so its fields stay plain data for equality and
export. Evaluating one calls the communicator on NumPy buffers (`eval_cpu`), inside the same
`mx.eval` as other work: every rank must reach the same collectives in the same order, which the
scheduler's deterministic order gives ranks that build the same graph. They have no `kernel_op`
(compiled steps keep them as opaque nodes, nothing fuses across them) and, as in MLX, do not
re-infer shapes in a shapeless trace. Send and Recv carry a unique `uid` so that CSE never merges
two messages into one.
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes as D
from .. import memory
from ..scheduler import eval_update
from .base import Primitive, bind, lazy_dataclass, ops

#: group handle -> communicator (rank(), size(), all_reduce, all_gather, sum_scatter, send, recv)
COMMS: dict = {}
_UIDS = itertools.count()


def register_comm(comm) -> int:
    """Register a group's communicator; returns the handle primitives name it by."""
    gid = len(COMMS)
    COMMS[gid] = comm
    return gid


def comm_of(gid: int, op: str):
    comm = COMMS.get(gid)
    if comm is None:
        raise RuntimeError(f"[{op}] No distributed group {gid} in this process (a function "
                           "exported from another process names groups it does not have).")
    return comm


def next_uid() -> int:
    return next(_UIDS)


def _c(x):
    """x as a C-contiguous buffer (np.ascontiguousarray would turn a 0-d array into 1-d)."""
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def _batch_to_axis1(x, ax, per_example_ndim):
    """Move the batch axis of a vmapped collective's input to axis 1, so the collective still
    acts on the per-example axis 0 (a per-example scalar gets a new axis 0 first)."""
    if per_example_ndim == 0:
        return ops.expand_dims(x, 0)
    return ops.moveaxis(x, ax, 1)


@lazy_dataclass
class AllReduce(Primitive):
    """x summed (or max/min: `reduce_type`) over the group, elementwise; written into x's own
    buffer when nothing else can see it (MLX donates it too)."""

    group: int
    reduce_type: str

    reinfers_shape = False  # as in MLX
    node_eval = True

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        out = memory.empty(x.shape, x.dtype)  # a reused block: fresh pages cost ms here
        comm_of(self.group, "all_reduce").all_reduce(_c(x), out, self.reduce_type)
        return [out]

    def write(self, buf):
        comm_of(self.group, "all_reduce").all_reduce(buf, buf, self.reduce_type)

    def eval_node(self, node):
        return eval_update(self, node)

    def vjp(self, primals, cotangents, argnums, outputs):
        return [cotangents[0]]  # MLX's rule, for every reduce_type

    def jvp(self, primals, tangents, argnums):
        return [bind(self, (tangents[0],))]

    def vmap(self, inputs, axes):
        return [bind(self, (inputs[0],))], [axes[0]]


@lazy_dataclass
class AllGather(Primitive):
    """Every rank's x concatenated along axis 0 in rank order (scalars: stacked)."""

    group: int

    reinfers_shape = False  # as in MLX

    def abstract_eval(self, x):
        n = comm_of(self.group, "all_gather").size()
        shape = (n * x.shape[0],) + tuple(x.shape[1:]) if x.shape else (n,)
        return [(shape, x.dtype)]

    def eval_cpu(self, x):
        out = comm_of(self.group, "all_gather").all_gather(_c(x))
        return [out.reshape((-1,) + x.shape[1:]) if x.shape else out]

    def vjp(self, primals, cotangents, argnums, outputs):
        x, ct = primals[0], cotangents[0]
        r = comm_of(self.group, "all_gather").rank()
        if x.ndim == 0:
            return [ct[r]]
        n0 = x.shape[0]
        return [ct[r * n0:(r + 1) * n0]]

    def jvp(self, primals, tangents, argnums):
        return [bind(self, (tangents[0],))]

    def vmap(self, inputs, axes):
        x, ax = inputs[0], axes[0]
        if ax is None:
            return [bind(self, (x,))], [None]
        return [bind(self, (_batch_to_axis1(x, ax, x.ndim - 1),))], [1]


@lazy_dataclass
class ReduceScatter(Primitive):
    """x summed over the group; rank r keeps the r-th of `size` equal parts of axis 0. (MLX has
    no transform rules for it: the vjp here is the all_gather of the cotangent, its transpose.)"""

    group: int

    reinfers_shape = False  # as in MLX

    def abstract_eval(self, x):
        n = comm_of(self.group, "sum_scatter").size()
        return [((x.shape[0] // n,) + tuple(x.shape[1:]), x.dtype)]

    def eval_cpu(self, x):
        return [comm_of(self.group, "sum_scatter").sum_scatter(_c(x))]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [bind(AllGather(self.group), (cotangents[0],))]

    def jvp(self, primals, tangents, argnums):
        return [bind(self, (tangents[0],))]

    def vmap(self, inputs, axes):
        x, ax = inputs[0], axes[0]
        if ax is None:
            return [bind(self, (x,))], [None]
        return [bind(self, (ops.moveaxis(x, ax, 1),))], [1]


@lazy_dataclass
class Send(Primitive):
    """Sends x to rank `dst` when evaluated; its value is x (as in MLX)."""

    group: int
    dst: int
    uid: int

    reinfers_shape = False  # as in MLX
    differentiable = False

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        comm_of(self.group, "send").send(_c(x), self.dst)
        return [x.view()]

    def vmap(self, inputs, axes):
        return [bind(Send(self.group, self.dst, next_uid()), (inputs[0],))], [axes[0]]


@lazy_dataclass
class Recv(Primitive):
    """An array of `shape` and `dtype` received from rank `src` when evaluated."""

    group: int
    src: int
    shape: tuple
    dtype: D.Dtype
    uid: int

    reinfers_shape = False  # as in MLX
    differentiable = False

    def abstract_eval(self):
        return [(self.shape, self.dtype)]

    def eval_cpu(self):
        return [comm_of(self.group, "recv").recv(self.shape, self.dtype.np_dtype, self.src)]

    def vmap(self, inputs, axes):
        return [bind(self, ())], [None]  # no inputs: never batched
