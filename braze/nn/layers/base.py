"""`nn.Module`: MLX's module, a dict holding parameters and child modules.

A module is a `dict` subclass. Arrays, dicts, lists and tuples assigned as attributes are
stored as dict entries (so `tree_map`, `mx.compile(inputs=model.state)` and the transforms see
them as a pytree); everything else (ints, flags, callables) is an ordinary Python attribute.
Parameters are the array entries (in nested dicts, lists and child modules) whose keys do not
start with an underscore; `freeze` moves keys into a per-module `_no_grad` set.

Where MLX's behaviour is a mutation that can fail half-way (`update(strict=True)` with an
unknown key, `load_weights` with a wrong shape), braze validates everything first so the model
is left unchanged when an error is raised.
"""
from __future__ import annotations

import textwrap
from typing import Any, Callable, List, Optional, Tuple, Union

import braze.core as mx
from braze.utils import tree_flatten, tree_unflatten

__all__ = ["Module"]


def _path(prefix, key):
    return f"{prefix}.{key}" if prefix else str(key)


class Module(dict):
    """Base class for neural-network layers and models (MLX's `mlx.nn.Module`)."""

    __call__: Callable

    def __init__(self):
        self._no_grad = set()
        self._training = True

    # -- attributes -------------------------------------------------------------------------
    @property
    def training(self) -> bool:
        """True in training mode (see `train` / `eval`)."""
        return self._training

    @property
    def state(self) -> "Module":
        """The module's state: the module itself (a live reference, as in MLX)."""
        return self

    def __getattr__(self, key: str):
        # only called when normal attribute lookup fails
        try:
            value = self[key]
        except KeyError:
            value = None
        if value is not None:
            return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")

    def __setattr__(self, key: str, val: Any):
        if isinstance(val, (mx.array, dict, list, tuple)):
            if key in self.__dict__:
                del self.__dict__[key]
            self[key] = val
        else:
            super().__setattr__(key, val)
            self.pop(key, None)

    def __delattr__(self, name):
        if self.get(name, None) is not None:
            del self[name]
        else:
            super().__delattr__(name)

    def _extra_repr(self) -> str:
        return ""

    def __repr__(self):
        children = tree_flatten(self.children(), is_leaf=self.is_module)
        value = f"{type(self).__name__}({self._extra_repr()}"
        for k, v in children:
            value += "\n" + textwrap.indent(f"({k}): {v!r}", prefix="  ")
        if children:
            value += "\n"
        return value + ")"

    # -- filters ----------------------------------------------------------------------------
    @staticmethod
    def is_module(value: Any) -> bool:
        """Whether `value` is a Module (the `is_leaf` of tree maps over modules)."""
        return isinstance(value, Module)

    @staticmethod
    def valid_child_filter(module: Module, key: str, value: Any) -> bool:
        """The `filter_fn` of `children()`: keep containers (dicts and lists)."""
        return isinstance(value, (dict, list))

    @staticmethod
    def valid_parameter_filter(module: Module, key: str, value: Any) -> bool:
        """The `filter_fn` of `parameters()`: keep arrays and containers under public
        keys (a key starting with "_" is not a parameter).
        """
        return isinstance(value, (dict, list, mx.array)) and not str(key).startswith("_")

    @staticmethod
    def trainable_parameter_filter(module: Module, key: str, value: Any) -> bool:
        """The `filter_fn` of `trainable_parameters()`: parameters that are not frozen."""
        return Module.valid_parameter_filter(module, key, value) and key not in module._no_grad

    def filter_and_map(self, filter_fn: Callable[["Module", str, Any], bool],
                       map_fn: Optional[Callable] = None,
                       is_leaf_fn: Optional[Callable[["Module", str, Any], bool]] = None) -> dict:
        """The module's contents as nested dicts and lists, keeping entries where
        `filter_fn(module, key, value)` holds and mapping leaves through `map_fn`."""
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or (lambda m, k, v: not isinstance(v, (Module, dict, list)))
        return {k: _unwrap(self, k, v, filter_fn, map_fn, is_leaf_fn)
                for k, v in self.items() if filter_fn(self, k, v)}

    def parameters(self) -> dict:
        """All parameter arrays, as nested dicts and lists."""
        return self.filter_and_map(self.valid_parameter_filter)

    def trainable_parameters(self) -> dict:
        """The parameters that are not frozen."""
        return self.filter_and_map(self.trainable_parameter_filter)

    def children(self) -> dict:
        """The direct child modules (inside dicts and lists too)."""
        return self.filter_and_map(self.valid_child_filter,
                                   is_leaf_fn=lambda m, k, v: isinstance(v, Module))

    def leaf_modules(self) -> dict:
        """The submodules that contain no other modules."""
        def is_leaf(m, k, v):
            return isinstance(v, Module) and len(tree_flatten(v.children())) == 0
        return self.filter_and_map(self.valid_child_filter, is_leaf_fn=is_leaf)

    # -- updates ----------------------------------------------------------------------------
    def update(self, parameters: dict, strict: bool = True) -> "Module":
        """Replace parameters with the arrays in `parameters` (a full or partial tree like
        `parameters()`). With `strict`, every key must name an existing parameter and every
        leaf must be an array; on error nothing is changed."""
        writes = []
        _plan_update(self, parameters, strict, "", writes)
        for dst, k, v in writes:
            dst[k] = v
        return self

    def update_modules(self, modules: dict, strict: bool = True) -> "Module":
        """Replace child modules with the ones in `modules` (a full or partial tree like
        `children()`); on error nothing is changed."""
        writes = []
        _plan_update_modules(self, modules, strict, "", writes)
        for dst, k, v in writes:
            dst[k] = v
        return self

    def apply(self, map_fn: Callable, filter_fn: Optional[Callable] = None) -> "Module":
        """Map the parameters (those passing `filter_fn`) through `map_fn` in place."""
        filter_fn = filter_fn or Module.valid_parameter_filter
        self.update(self.filter_and_map(filter_fn, map_fn))
        return self

    def apply_to_modules(self, apply_fn: Callable[[str, "Module"], Any]) -> "Module":
        """Call `apply_fn(path, module)` on this module and every submodule."""
        stack = [("", self)]
        while stack:
            prefix, mod = stack.pop()
            apply_fn(prefix, mod)
            prefix = "." + prefix if prefix else ""
            stack.extend(tree_flatten(mod.children(), prefix=prefix, is_leaf=self.is_module))
        return self

    def modules(self) -> list:
        """This module and all its submodules."""
        out = []
        self.apply_to_modules(lambda k, m: out.append(m))
        return out

    def named_modules(self) -> list:
        """[(dotted path, module), ...] for this module ("") and all its submodules."""
        out = []
        self.apply_to_modules(lambda k, m: out.append((k, m)))
        return out

    # -- freezing ---------------------------------------------------------------------------
    def _validate_keys(self, keys, strict):
        keys = keys if isinstance(keys, list) else [keys]
        if strict:
            for k in keys:
                if k not in self:
                    raise KeyError(f"Module doesn't contain member {k}.")
        return keys

    def _validate_keys_recursive(self, keys):
        keys = keys if isinstance(keys, list) else [keys]
        mods = self.modules()
        for k in keys:
            if not any(k in m for m in mods):
                raise KeyError(f"Module doesn't contain member {k}.")

    def freeze(self, *, recurse: bool = True, keys: Optional[Union[str, List[str]]] = None,
               strict: bool = False) -> "Module":
        """Stop computing gradients for all parameters, or for `keys` (e.g. "bias")."""
        def impl(_, m):
            local = keys
            if local is None:
                local = [k for k, _ in tree_flatten(m.filter_and_map(
                    lambda mm, k, v: not isinstance(v, Module)
                    and mm.valid_parameter_filter(mm, k, v)))]
            local = m._validate_keys(local, strict_now)
            m._no_grad.update(local)

        strict_now = strict
        if recurse:
            if strict and keys is not None:
                self._validate_keys_recursive(keys)
                strict_now = False
            self.apply_to_modules(impl)
        else:
            impl("", self)
        return self

    def unfreeze(self, *, recurse: bool = True, keys: Optional[Union[str, List[str]]] = None,
                 strict: bool = False) -> "Module":
        """Compute gradients again for all parameters, or for `keys`.

        Unlike MLX, a recursive unfreeze keeps what a submodule always keeps frozen (BatchNorm's
        running statistics) frozen, as calling `unfreeze` on that submodule directly does.
        """
        def impl(_, m):
            if keys is None:
                m._no_grad.clear()
            else:
                m._no_grad.difference_update(m._validate_keys(keys, strict_now))
            m._no_grad.update(m._always_frozen())

        strict_now = strict
        if recurse:
            if strict and keys is not None:
                self._validate_keys_recursive(keys)
                strict_now = False
            self.apply_to_modules(impl)
        else:
            impl("", self)
        return self

    def _always_frozen(self) -> tuple:
        """Keys `unfreeze` never unfreezes (BatchNorm: its running statistics)."""
        return ()

    # -- modes, dtypes ----------------------------------------------------------------------
    def _set_training_mode(self, mode: bool) -> None:
        self._training = mode

    def train(self, mode: bool = True) -> "Module":
        """Set training mode (Dropout active, BatchNorm updating its statistics) recursively."""
        self.apply_to_modules(lambda _, m: m._set_training_mode(mode))
        return self

    def eval(self) -> "Module":
        """Set evaluation mode recursively (`train(False)`)."""
        return self.train(False)

    def set_dtype(self, dtype: mx.Dtype,
                  predicate: Optional[Callable] = lambda x: mx.issubdtype(x, mx.floating)
                  ) -> None:
        """Cast the parameters whose dtype satisfies `predicate` (floating ones by default)."""
        if predicate is None:
            def predicate(_):
                return True
        self.apply(lambda x: x.astype(dtype) if predicate(x.dtype) else x)

    # -- weights on disk --------------------------------------------------------------------
    def load_weights(self, file_or_weights: Union[str, List[Tuple[str, Any]]],
                     strict: bool = True) -> "Module":
        """Load weights from a `.npz` or `.safetensors` file, or a list of (name, array).

        With `strict`, the names must be exactly the model's parameters and the shapes must
        match; on any error the model is unchanged.
        """
        from braze._src.io import load as _load

        weights = file_or_weights
        if isinstance(weights, str) or hasattr(weights, "__fspath__"):
            weights = list(_load(weights).items())
        weights = list(weights)
        if strict:
            new = dict(weights)
            cur = tree_flatten(self.parameters(), destination={})
            extras = new.keys() - cur.keys()
            if extras:
                raise ValueError(f"Received {len(extras)} parameters not in model: \n"
                                 + ",\n".join(sorted(extras)) + ".")
            missing = cur.keys() - new.keys()
            if missing:
                raise ValueError(f"Missing {len(missing)} parameters: \n"
                                 + ",\n".join(sorted(missing)) + ".")
            for k, v in cur.items():
                v_new = new[k]
                if not isinstance(v_new, mx.array):
                    raise ValueError(f"Expected mx.array but received {type(v_new)} for "
                                     f"parameter {k}")
                if v_new.shape != v.shape:
                    raise ValueError(f"Expected shape {v.shape} but received shape "
                                     f"{v_new.shape} for parameter {k}")
        if weights:
            self.update(tree_unflatten(weights), strict=False)
        return self

    def save_weights(self, file: str) -> None:
        """Save the parameters to `.npz` or `.safetensors` (chosen by the extension)."""
        from braze._src.io import save_safetensors, savez

        file = str(file)
        params = tree_flatten(self.parameters(), destination={})
        if file.endswith(".npz"):
            savez(file, **params)
        elif file.endswith(".safetensors"):
            save_safetensors(file, params)
        else:
            raise ValueError(f"Unsupported file extension for {file}. Use '.npz' or "
                             "'.safetensors'.")


# -- helpers ----------------------------------------------------------------------------------
def _unwrap(model, key, value, filter_fn, map_fn, is_leaf_fn):
    if is_leaf_fn(model, key, value):
        return map_fn(value)
    if isinstance(value, Module):
        return {k: _unwrap(value, k, v, filter_fn, map_fn, is_leaf_fn)
                for k, v in value.items() if filter_fn(value, k, v)}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            tk = f"{key}.{k}"
            out[k] = (_unwrap(model, tk, v, filter_fn, map_fn, is_leaf_fn)
                      if filter_fn(model, tk, v) else {})
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            tk = f"{key}.{i}"
            out.append(_unwrap(model, tk, v, filter_fn, map_fn, is_leaf_fn)
                       if filter_fn(model, tk, v) else {})
        return out
    raise RuntimeError("Unexpected leaf found while traversing the module")


def _plan_update(dst, params, strict, prefix, writes):
    """Collect (container, key, value) writes for Module.update, validating as MLX does."""
    if isinstance(params, dict):
        if not isinstance(dst, dict):
            if strict and params:
                raise ValueError(f"Received a dict for {prefix!r}, which is a "
                                 f"{type(dst).__name__} in the module.")
            return
        for k, new in params.items():
            where = _path(prefix, k)
            if k in dst:
                cur = dst[k]
                if isinstance(cur, mx.array):
                    if strict and not isinstance(new, mx.array):
                        raise ValueError(f"Received invalid type: {type(new).__name__} for "
                                         f"parameter {where!r} (expected an array).")
                    writes.append((dst, k, new))
                else:
                    _plan_update(cur, new, strict, where, writes)
            elif strict:
                raise ValueError(f'Module does not have parameter named "{where}".')
    elif isinstance(params, list):
        if not isinstance(dst, list):
            if strict and params:
                raise ValueError(f"Received a list for {prefix!r}, which is a "
                                 f"{type(dst).__name__} in the module.")
            return
        for i, new in enumerate(params):
            where = _path(prefix, i)
            if i >= len(dst):
                if strict:
                    raise ValueError(f"List index {i} is out of bounds for destination of "
                                     f"length {len(dst)} (at {prefix!r}).")
                continue
            cur = dst[i]
            if isinstance(cur, mx.array):
                if strict and not isinstance(new, mx.array):
                    raise ValueError(f"Received invalid type: {type(new).__name__} for "
                                     f"parameter {where!r} (expected an array).")
                writes.append((dst, i, new))
            else:
                _plan_update(cur, new, strict, where, writes)
    elif strict:
        raise ValueError(f"Received invalid type: {type(params).__name__} at {prefix!r}.")


def _plan_update_modules(dst, modules, strict, prefix, writes):
    if isinstance(modules, dict):
        items = list(modules.items())
    elif isinstance(modules, list):
        items = list(enumerate(modules))
    else:
        if strict:
            raise ValueError(f"Received invalid type: {type(modules).__name__}.")
        return
    for k, new in items:
        where = _path(prefix, k)
        if isinstance(dst, dict):
            present = k in dst
        else:
            present = isinstance(k, int) and k < len(dst)
        if not present:
            if strict:
                if isinstance(dst, list):
                    raise ValueError(f"List index {k} is out of bounds for destination of "
                                     f"length {len(dst)} (at {prefix!r}).")
                raise ValueError(f'Module does not have sub-module named "{where}".')
            continue
        cur = dst[k]
        if isinstance(cur, Module) and isinstance(new, Module):
            writes.append((dst, k, new))
        elif isinstance(cur, (dict, list)):
            _plan_update_modules(cur, new, strict, where, writes)
        elif strict and new != {}:
            raise ValueError(f"Received invalid type: {type(new).__name__} for {where!r}.")
