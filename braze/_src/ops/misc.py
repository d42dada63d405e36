"""Public ops that are not array math: eval, graph export, dtype queries, buffer sizes."""
from __future__ import annotations

import os
from typing import IO, Any, List, Sequence, Union

from .. import dtypes as D
from .. import tree
from ..array import TraceState, array
from ..device import defer_error
from ..graph import to_dot
from ..scheduler import eval_arrays
from ._typing import Dtype, Scalar

__all__ = ["eval", "async_eval", "export_to_dot", "result_type", "issubdtype", "can_cast",
           "isdtype", "get_array_buffer_size", "depends"]

issubdtype = D.issubdtype
isdtype = D.isdtype


def _array_leaves(args) -> list:
    """The arrays in a tuple of arrays / trees of arrays; other leaves are ignored (as MLX)."""
    out = []
    todo = list(reversed(args))
    while todo:
        x = todo.pop()
        if isinstance(x, array):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            todo.extend(reversed(x))
        elif isinstance(x, dict):
            todo.extend(reversed(list(x.values())))
    return out


def eval(*args: Any) -> None:  # noqa: A001 - MLX's name
    """Evaluate arrays and trees (lists, tuples, dicts) of arrays. Non-array leaves are
    ignored."""
    if len(args) == 1:
        x = args[0]
        if type(x) is array:  # the common case, without a tree walk
            if x._data is None:
                eval_arrays(args)
            return
        if type(x) is tuple or type(x) is list:  # `mx.eval(state)`: look inside
            args = x
    pending = False
    for x in args:  # a flat sequence of arrays (a compiled step's outputs): no walk either
        if type(x) is not array:
            break
        if x._data is None:
            pending = True
    else:
        if pending:
            eval_arrays(args)
        return
    arrays = _array_leaves(args)
    if arrays:
        eval_arrays(arrays)


def async_eval(*args: Any) -> None:
    """MLX's asynchronous eval. braze evaluates synchronously, so this is `eval`; like MLX it
    refuses to run inside a transformation (grad, vmap, compile traces)."""
    if TraceState.depth:
        raise ValueError("[async_eval] Not allowed inside a graph transformation.")
    try:
        eval(*args)
    except Exception as e:  # noqa: BLE001 - as MLX: a failure surfaces at synchronize
        defer_error(e)


def export_to_dot(file: Union[str, IO[str]], *args: Any, **kwargs: Any) -> None:
    """Write the graph behind the output arrays `args` (arrays or trees of arrays) to `file` in
    Graphviz DOT format. `file` is a path or an object with `write`; keyword arguments name
    arrays of the graph (`x=x`) so the output is easier to read."""
    outputs = []
    for x in tree.leaves(args):
        if not isinstance(x, array):
            raise ValueError("[export_to_dot] The arguments should contain only arrays, got "
                             f"{type(x).__name__}.")
        outputs.append(x)
    for name, x in kwargs.items():
        if not isinstance(x, array):
            raise ValueError(f"[export_to_dot] Named argument {name!r} should be an array, got "
                             f"{type(x).__name__}.")
    text = to_dot(outputs, kwargs)
    if isinstance(file, (str, bytes, os.PathLike)):
        with open(file, "w") as f:
            f.write(text)
    elif hasattr(file, "write"):
        file.write(text)
    else:
        raise TypeError(f"[export_to_dot] Expected a path or a writable file object, got "
                        f"{type(file).__name__}.")


def result_type(*arrays_and_dtypes: Union[array, Dtype, Scalar]) -> D.Dtype:
    """The dtype that promoting all the arrays and dtypes together gives. Python scalars are
    rejected (ValueError), as in MLX: their type depends on what they are combined with."""
    if not arrays_and_dtypes:
        raise ValueError("[result_type] At least one array or dtype is required.")
    dts = []
    for x in arrays_and_dtypes:
        if isinstance(x, array):
            dts.append(x._dtype)
        elif isinstance(x, D.Dtype):
            dts.append(x)
        else:
            raise ValueError("[result_type] Inputs must be arrays or dtypes.")
    return D.promote_types(*dts)


def can_cast(from_: Union[Dtype, array], to: Union[Dtype, array]) -> bool:
    """MLX's can_cast: `from_` (an array or a dtype) can be cast to `to` when promoting the two
    gives back `to`."""
    if isinstance(from_, array):
        from_ = from_._dtype
    elif not isinstance(from_, D.Dtype):
        raise ValueError("[can_cast] `from_` must be an array or a dtype.")
    if not isinstance(to, D.Dtype):
        raise TypeError(f"[can_cast] `to` must be a Dtype, got {type(to).__name__}: {to!r}.")
    return D.can_cast(from_, to)


def get_array_buffer_size(*args: Any) -> int:
    """Bytes of the unique buffers behind the (evaluated) arrays in `args` (arrays or trees of
    arrays; other leaves are ignored). Views count their whole base buffer, once."""
    seen = {}
    for a in _array_leaves(args):
        data = a._data
        if data is None:
            raise ValueError(
                "[get_array_buffer_size] Arrays must be evaluated before querying buffer size.")
        while data.base is not None and hasattr(data.base, "nbytes"):
            data = data.base
        seen[id(data)] = data.nbytes
    return sum(seen.values())


def depends(inputs: Union[array, Sequence[array]],
            dependencies: Union[array, Sequence[array]]) -> Union[array, List[array]]:
    """`inputs` unchanged, but computed only after `dependencies` (an array or a sequence of
    arrays each; a single array in gives a single array out)."""
    from ..prims.base import bind
    from ..prims.core import Depends

    single = isinstance(inputs, array)
    try:
        ins = [inputs] if single else list(inputs)
        deps = [dependencies] if isinstance(dependencies, array) else list(dependencies)
    except TypeError:
        ins = deps = []  # not a sequence: the message below names the op
    if not ins or not all(isinstance(x, array) for x in ins + deps):
        raise TypeError("[depends] Expected arrays or non-empty sequences of arrays.")
    out = bind(Depends(len(ins)), tuple(ins + deps))
    if len(ins) == 1:
        return out if single else [out]
    return list(out)
