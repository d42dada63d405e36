"""`mx.custom_function` and `mx.checkpoint`: functions whose transformations are overridden.

Design (as in MLX): calling a custom function inside a transformation runs the forward function
normally, then wraps its outputs in one `CustomTransforms` node whose inputs are the array
arguments (the primals) followed by the forward outputs. Evaluating the node just passes the
forward outputs through (zero-copy views), so the forward runs exactly once.

For each transform the node either uses the override or looks straight through to the forward
graph:

* with an override, `walked_inputs(kind)` tells the transform to see only the primals: the
  forward graph is opaque to it and the override's rule is called with the primals;
* without one, the transform sees the forward outputs as inputs and the rule passes them
  through (vjp: cotangents go to the forward outputs; jvp: their tangents are the node's;
  vmap: their batched versions are the node's outputs), so the default behaviour is exactly the
  one of the undecorated function.

Outside any transformation (trace depth 0) a custom function is just its forward function.
`checkpoint(fun)` is a custom function whose vjp re-runs `fun` on the primals (MLX semantics:
values and gradients are unchanged; the forward's intermediates are not kept for the backward
pass, they are recomputed; arrays captured by closure are constants for the gradient).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from .. import tree as T
from ..array import TraceState, array
from ..prims.base import Primitive, bind
from .autodiff import TransformTypeError
from .autodiff import vjp as _vjp


@dataclass(frozen=True)
class CustomTransforms(Primitive):
    """Forward outputs passed through, with optional vjp / jvp / vmap overrides.

    Inputs are `n_primals` primal arrays then `n_outputs` forward outputs. The overrides work
    on flat lists of arrays (custom_function adapts the user's tree-structured functions):
    `vjp_fun(primals, cotangents, outputs) -> one cotangent (or None) per primal`,
    `jvp_fun(primals, tangents) -> one tangent per output` (tangents None where absent),
    `vmap_fun(inputs, axes) -> (outputs, out_axes)`.
    """
    reinfers_shape = False  # its rules were traced for these shapes

    n_primals: int
    n_outputs: int
    vjp_fun: object = None
    jvp_fun: object = None
    vmap_fun: object = None

    def walked_inputs(self, kind):
        if getattr(self, f"{kind}_fun") is not None:
            return self.n_primals
        return self.n_primals + self.n_outputs

    def abstract_eval(self, *inputs):
        return [(x.shape, x.dtype) for x in inputs[self.n_primals:]]

    def eval_cpu(self, *xs):
        return [x.view() for x in xs[self.n_primals:]]

    def vjp(self, primals, cotangents, argnums, outputs):
        n = self.n_primals
        if self.vjp_fun is None:
            return [None if i < n else cotangents[i - n] for i in argnums]
        res = self.vjp_fun(primals[:n], cotangents, outputs)
        return [res[i] for i in argnums]

    def jvp(self, primals, tangents, argnums):
        n = self.n_primals
        if self.jvp_fun is None:
            tans = dict(zip(argnums, tangents))
            return [tans.get(n + j) for j in range(self.n_outputs)]
        full = [None] * n
        for i, t in zip(argnums, tangents):
            full[i] = t
        return self.jvp_fun(primals[:n], full)

    def vmap(self, inputs, axes):
        n = self.n_primals
        if self.vmap_fun is None:
            return list(inputs[n:]), list(axes[n:])
        return self.vmap_fun(list(inputs[:n]), list(axes[:n]))


# -- adapters between the user's tree-structured functions and the flat rules -----------------
class _Call:
    """The structure of one call: where the array arguments sit among the positional leaves."""

    def __init__(self, args, kwargs, out_def, name):
        self.leaves, self.a_def = T.flatten(list(args))
        self.pos = [i for i, x in enumerate(self.leaves) if isinstance(x, array)]
        self.n_args = len(args)
        self.kwargs = kwargs
        self.out_def = out_def
        self.name = name
        self.out_shapes = []

    def args_with(self, values, fill=None, keep=True):
        """The positional arguments with the array leaves replaced by `values` (non-array
        leaves kept, or replaced by `fill`); a single argument is returned unwrapped."""
        leaves = list(self.leaves) if keep else [fill] * len(self.leaves)
        for k, i in enumerate(self.pos):
            leaves[i] = values[k]
        args = T.unflatten(self.a_def, leaves)
        return args[0] if self.n_args == 1 else tuple(args)

    def outputs(self, values):
        return T.unflatten(self.out_def, list(values))

    def no_kwargs(self, what):
        if self.kwargs:
            raise ValueError(f"[custom {what}] Function should only accept positional "
                             f"arguments.")


def _per_primal(res, call, primals, what):
    """Flatten a custom rule's result into one entry per array argument."""
    flat = T.flatten(res)[0]
    n = len(primals)
    if len(flat) == len(call.leaves) and len(flat) != n:
        flat = [flat[i] for i in call.pos]
    if len(flat) != n:
        raise ValueError(f"[custom_function] The custom {what} of {call.name} returned "
                         f"{len(flat)} values but the function has {n} array arguments.")
    out = []
    for g, p in zip(flat, primals):
        if g is None:
            out.append(None)
            continue
        if not isinstance(g, array):
            raise ValueError(f"[custom_function] The custom {what} of {call.name} must return "
                             f"arrays (or None), got {type(g).__name__}.")
        if tuple(g.shape) != tuple(p.shape):
            raise ValueError(f"[custom_function] The custom {what} of {call.name} returned "
                             f"shape {tuple(g.shape)} for an argument of shape "
                             f"{tuple(p.shape)}.")
        out.append(g if g.dtype == p.dtype else g.astype(p.dtype))
    return out


def _per_output(res, call, shapes, what):
    flat = T.flatten(res)[0]
    if len(flat) != len(shapes):
        raise ValueError(f"[custom_function] The custom {what} of {call.name} returned "
                         f"{len(flat)} values but the function has {len(shapes)} outputs.")
    for t, s in zip(flat, shapes):
        if not isinstance(t, array):
            raise ValueError(f"[custom_function] The custom {what} of {call.name} must return "
                             f"arrays, got {type(t).__name__}.")
        if what == "jvp" and tuple(t.shape) != s:
            raise ValueError(f"[custom_function] The custom jvp of {call.name} returned shape "
                             f"{tuple(t.shape)} for an output of shape {s}.")
    return flat


def _make_vjp(user, call):
    def vjp_fun(primals, cotangents, outputs):
        res = user(call.args_with(primals), call.outputs(cotangents), call.outputs(outputs),
                   **call.kwargs)
        return _per_primal(res, call, primals, "vjp")
    return vjp_fun


def _make_jvp(user, call):
    def jvp_fun(primals, tangents):
        call.no_kwargs("jvp")
        res = user(call.args_with(primals), call.args_with(tangents, None, keep=False))
        return _per_output(res, call, call.out_shapes, "jvp")
    return jvp_fun


def _make_vmap(user, call):
    def vmap_fun(inputs, axes):
        call.no_kwargs("vmap")
        res = user(call.args_with(inputs), call.args_with(axes, None, keep=False))
        if not isinstance(res, (tuple, list)) or len(res) != 2:
            raise ValueError(f"[custom_function] The custom vmap of {call.name} must return a "
                             f"pair (outputs, out_axes).")
        outs, o_axes = res
        flat = _per_output(outs, call, call.out_shapes, "vmap")
        if o_axes is None or isinstance(o_axes, int):
            flat_axes = [o_axes] * len(flat)
        else:
            flat_axes = T.flatten(o_axes)[0]
        if len(flat_axes) != len(flat):
            raise ValueError(f"[custom_function] The custom vmap of {call.name} returned "
                             f"{len(flat_axes)} axes for {len(flat)} outputs.")
        norm = []
        for o, ax in zip(flat, flat_axes):
            if ax is not None:
                if not isinstance(ax, int) or not -o.ndim <= ax < o.ndim:
                    raise ValueError(f"[custom_function] The custom vmap of {call.name} "
                                     f"returned an invalid axis {ax!r} for an output of shape "
                                     f"{tuple(o.shape)}.")
                ax %= o.ndim
            norm.append(ax)
        return flat, norm
    return vmap_fun


def _wrap_outputs(prim_kwargs, call, primals, outs):
    """Bind the CustomTransforms node over primals + outputs; rebuild the output tree."""
    call.out_shapes = [tuple(o.shape) for o in outs]
    prim = CustomTransforms(len(primals), len(outs), **prim_kwargs)
    res = bind(prim, tuple(primals) + tuple(outs))
    res = res if isinstance(res, list) else [res]
    return call.outputs(res)


class custom_function:
    """MLX's `mx.custom_function`: a decorator whose `.vjp`, `.jvp` and `.vmap` methods
    register overrides used by the transformations (undefined ones fall back to the default).

    * `vjp(primals, cotangents, outputs, **kwargs)` returns one cotangent per positional
      argument (a tree like the arguments; None for a zero cotangent);
    * `jvp(primals, tangents)` returns the output tangents (None in `tangents` where an
      argument has no tangent);
    * `vmap(inputs, axes)` returns `(outputs, out_axes)`.

    A single positional argument is passed unwrapped (not as a 1-tuple), and `cotangents` /
    `outputs` have the structure of the function's return value. Arrays captured by closure are
    constants for the overridden transforms.
    """

    def __init__(self, fun):
        if not callable(fun):
            raise TransformTypeError(f"[custom_function] Expected a callable, got "
                                     f"{type(fun).__name__}.")
        functools.update_wrapper(self, fun, updated=())
        self._fun = fun
        self._vjp = self._jvp = self._vmap = None

    def vjp(self, fun):
        """Set the custom vjp: `fun(primals, cotangents, outputs) -> cotangents`."""
        self._vjp = self._check(fun, "vjp")
        return self

    def jvp(self, fun):
        """Set the custom jvp: `fun(primals, tangents) -> tangents of the outputs`."""
        self._jvp = self._check(fun, "jvp")
        return self

    def vmap(self, fun):
        """Set the custom vmap: `fun(inputs, axes) -> (outputs, out_axes)`."""
        self._vmap = self._check(fun, "vmap")
        return self

    @staticmethod
    def _check(fun, what):
        if not callable(fun):
            raise TransformTypeError(f"[custom_function] The custom {what} must be callable, "
                                     f"got {type(fun).__name__}.")
        return fun

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        if TraceState.depth == 0 or (self._vjp is None and self._jvp is None
                                     and self._vmap is None):
            return self._fun(*args, **kwargs)
        out = self._fun(*args, **kwargs)
        outs, o_def = T.flatten(out)
        if not outs or not all(isinstance(o, array) for o in outs):
            bad = next((o for o in outs if not isinstance(o, array)), None)
            raise ValueError(f"[custom_function] A function with custom transformations must "
                             f"return arrays (or trees of arrays), got "
                             f"{type(bad).__name__ if outs else 'no outputs'}.")
        name = getattr(self._fun, "__name__", "the function")
        call = _Call(args, kwargs, o_def, name)
        primals = [call.leaves[i] for i in call.pos]
        prim_kwargs = dict(
            vjp_fun=_make_vjp(self._vjp, call) if self._vjp is not None else None,
            jvp_fun=_make_jvp(self._jvp, call) if self._jvp is not None else None,
            vmap_fun=_make_vmap(self._vmap, call) if self._vmap is not None else None)
        return _wrap_outputs(prim_kwargs, call, primals, outs)

    def __repr__(self):
        return f"<custom_function {getattr(self._fun, '__name__', self._fun)!r}>"


def checkpoint(fun: Callable) -> Callable:
    """MLX's `mx.checkpoint(fun)`: same values and gradients as `fun`, but the backward pass
    recomputes `fun`'s intermediates from its inputs instead of keeping them."""
    if not callable(fun):
        raise TransformTypeError(f"[checkpoint] Expected a callable, got {type(fun).__name__}.")

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        if TraceState.depth == 0:
            return fun(*args, **kwargs)
        leaves, in_def = T.flatten((list(args), dict(kwargs)))
        pos = [i for i, x in enumerate(leaves) if isinstance(x, array)]
        out = fun(*args, **kwargs)
        outs, o_def = T.flatten(out)
        if not outs or not all(isinstance(o, array) for o in outs):
            return out  # nothing to differentiate through a checkpoint boundary

        def rerun(*primals):
            lv = list(leaves)
            for k, i in enumerate(pos):
                lv[i] = primals[k]
            a, kw = T.unflatten(in_def, lv)
            res = T.flatten(fun(*a, **kw))[0]
            return res

        def vjp_fun(primals, cotangents, outputs):
            return _vjp(rerun, list(primals), list(cotangents))[1]

        prim = CustomTransforms(len(pos), len(outs), vjp_fun=vjp_fun)
        res = bind(prim, tuple(leaves[i] for i in pos) + tuple(outs))
        res = res if isinstance(res, list) else [res]
        return T.unflatten(o_def, res)

    return wrapper
