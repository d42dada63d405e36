"""Optimizers with MLX's API (`mlx.optimizers`), written from its documented behaviour.

An optimizer keeps everything that changes between steps in `state`, a dict tree of arrays:
`state["step"]` (uint64, incremented by every `apply_gradients`), `state["learning_rate"]`
(a float32 array, recomputed from the schedule before each step when it is one) and, per
parameter, a dict of moments mirroring the parameter tree. Because all of it lives in arrays of
one dict, a compiled training step captures it with
`mx.compile(step, inputs=[model.state, opt.state], outputs=[model.state, opt.state])`.

`opt.init(model.trainable_parameters())` before compiling is optional (as in MLX): without it
the first compiled call creates the moments inside the trace, they are outputs of that trace,
and the second call retraces once (the captured state grew).
Hyper-parameters that are Python floats (betas, eps, weight decay) are
constants of the traced graph; only `learning_rate` (and other scheduled values) are arrays.

braze differs from MLX only in its error messages: a gradient with no matching parameter, a
gradient whose shape differs from its parameter's, or a non-array gradient raises a
ValueError/TypeError naming the parameter path (MLX raises a bare KeyError or broadcasts).
Gradient subtrees without arrays (the `{}` that `parameters()` makes of a module's strings,
numbers and other non-array attributes) are passed through whatever the model holds there.
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Any, Callable, List, Optional, Tuple, Union

import braze.core as mx
from braze.utils import tree_flatten, tree_map, tree_merge, tree_reduce, tree_unflatten

__all__ = ["Optimizer", "MultiOptimizer", "SGD", "RMSprop", "Adagrad", "AdaDelta", "Adam",
           "AdamW", "Adamax", "Lion", "Adafactor", "Muon", "clip_grad_norm"]

LearningRate = Union[float, mx.array, Callable[[mx.array], mx.array]]


def _join(path, key):
    return f"{path}.{key}" if path else str(key)


def _has_array(tree) -> bool:
    if isinstance(tree, dict):
        return any(_has_array(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return any(_has_array(v) for v in tree)
    return True  # a leaf: an array, or a bad gradient the checks report


def _check_scalar(name: str, value, owner: str):
    """A hyper-parameter that becomes an array: a real number or a scalar array."""
    if isinstance(value, mx.array):
        if value.ndim != 0 and value.size != 1:
            raise ValueError(f"[{owner}] {name} must be a scalar, got an array of shape "
                             f"{value.shape}.")
        return value
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"[{owner}] {name} must be a float, a scalar array or a schedule "
                        f"(a callable of the step), got {type(value).__name__}: {value!r}.")
    return value


class Optimizer:
    """The base class of all optimizers: applies a per-parameter rule (`apply_single`) over a
    tree of parameters, with per-parameter state made by `init_single`."""

    def __init__(self, schedulers: Optional[dict] = None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = {k: v for k, v in (schedulers or {}).items()}

    # -- public API --------------------------------------------------------------------------
    def update(self, model: Any, gradients: dict) -> None:
        """Apply `gradients` to `model`'s parameters and write them back with `model.update`.

        `model` is anything with `update(tree)` that `apply_gradients` accepts as parameters
        (an `nn.Module`, or a dict subclass with an `update` method)."""
        model.update(self.apply_gradients(gradients, model))

    def init(self, parameters: dict) -> None:
        """Create the state for every parameter of `parameters` that has none yet.

        Optional (the first `apply_gradients` initialises from the gradients), but needed
        before compiling a step that captures `state`, and handy to look at the state."""

        def update_state(params, state):
            if isinstance(params, (list, tuple)):
                if not isinstance(state, (list, tuple)):
                    state = []
                state = list(state)
                for i in range(min(len(state), len(params))):
                    state[i] = update_state(params[i], state[i])
                if len(state) < len(params):
                    state.extend(tree_map(lambda _: {}, list(params[len(state):])))
                return type(params)(state) if not hasattr(params, "_fields") else \
                    type(params)(*state)
            if isinstance(params, dict):
                if not isinstance(state, dict):
                    state = {}
                for k, v in params.items():
                    if k not in state:
                        state[k] = tree_map(lambda _: {}, v)
                    else:
                        state[k] = update_state(v, state[k])
                return state
            return state

        if not isinstance(parameters, dict):
            raise TypeError(f"[{type(self).__name__}.init] parameters must be a dict tree, "
                            f"got {type(parameters).__name__}.")
        update_state(parameters, self._state)
        tree_map(lambda p, s: s or self.init_single(p, s), parameters, self._state)
        self._initialized = True

    def init_single(self, parameter: mx.array, state: dict) -> None:
        """Initialise the state of one parameter (subclasses)."""
        raise NotImplementedError()

    def apply_gradients(self, gradients: dict, parameters: dict) -> dict:
        """Return the parameters updated by `gradients` (a tree like the gradients; the
        parameters may be a superset of them, e.g. a whole model)."""
        if not isinstance(gradients, dict):
            raise TypeError(f"[{type(self).__name__}] gradients must be a dict tree, got "
                            f"{type(gradients).__name__}.")
        self._check(gradients, parameters, "")
        if not self._initialized:
            self.init(gradients)

        for param, scheduler in self._schedulers.items():
            self.state[param] = scheduler(self.step)

        self.state["step"] = self.step + 1

        return self._apply(gradients, parameters, self.state, "")

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        """The update rule of one parameter (subclasses); may write new moments to `state`."""
        raise NotImplementedError()

    # -- the walks over gradients, parameters and state ---------------------------------------
    def _check(self, g, p, path):
        """Gradients against parameters, before anything is mutated: every gradient needs a
        parameter of the same shape, at the same place in a tree of the same kind."""
        name = type(self).__name__
        if isinstance(g, (dict, list, tuple)) and not _has_array(g):
            # nothing to apply: what `parameters()` makes of a module's non-array attributes
            # (names, configs, flags), so the model may hold a str or an int there
            return
        if isinstance(g, dict):
            if not isinstance(p, dict):
                raise ValueError(f"[{name}] gradient tree has a dict at '{path or '<root>'}' "
                                 f"but the parameters have a {type(p).__name__} there.")
            for k, gk in g.items():
                if k not in p:
                    raise ValueError(f"[{name}] gradient '{_join(path, k)}' has no matching "
                                     f"parameter (parameters there: {sorted(map(str, p))}).")
                self._check(gk, p[k], _join(path, k))
        elif isinstance(g, (list, tuple)):
            if not isinstance(p, (list, tuple)) or len(p) < len(g):
                raise ValueError(f"[{name}] gradient tree has a {type(g).__name__} of length "
                                 f"{len(g)} at '{path or '<root>'}' but the parameters have "
                                 f"{type(p).__name__}"
                                 + (f" of length {len(p)}" if isinstance(p, (list, tuple))
                                    else "") + " there.")
            for i, gi in enumerate(g):
                self._check(gi, p[i], _join(path, i))
        else:
            if not isinstance(g, mx.array):
                raise TypeError(f"[{name}] gradient '{path}' must be an array, got "
                                f"{type(g).__name__}.")
            if not isinstance(p, mx.array):
                raise TypeError(f"[{name}] parameter '{path}' must be an array, got "
                                f"{type(p).__name__}.")
            if tuple(g.shape) != tuple(p.shape):
                raise ValueError(f"[{name}] gradient '{path}' has shape {tuple(g.shape)} but "
                                 f"the parameter has shape {tuple(p.shape)}.")

    def _apply(self, g, p, s, path):
        """tree_map(apply_single, gradients, parameters, state), creating the state of
        parameters that have none yet (e.g. unfrozen after init)."""
        if isinstance(g, dict):
            out = {}
            for k, gk in g.items():
                if k not in s:
                    s[k] = tree_map(lambda _: {}, gk)
                out[k] = self._apply(gk, p[k], s[k], _join(path, k))
            return out
        if isinstance(g, (list, tuple)):
            if len(s) < len(g):
                if not isinstance(s, list):
                    raise ValueError(f"[{type(self).__name__}] optimizer state at '{path}' "
                                     f"does not match the gradients; call init() again.")
                s.extend(tree_map(lambda _: {}, list(g[len(s):])))
            out = [self._apply(gi, p[i], s[i], _join(path, i)) for i, gi in enumerate(g)]
            return type(g)(*out) if hasattr(g, "_fields") else type(g)(out)
        if not isinstance(s, dict):
            raise ValueError(f"[{type(self).__name__}] optimizer state at '{path}' is a "
                             f"{type(s).__name__}, expected a dict; the state does not match "
                             f"the gradients.")
        if not s:
            self.init_single(g, s)
        return self.apply_single(g, p, s)

    # -- state and learning rate ----------------------------------------------------------------
    @property
    def state(self):
        """The optimizer's state dict (step, learning rate, per-parameter moments)."""
        return self._state

    @state.setter
    def state(self, state: dict):
        if not isinstance(state, dict):
            raise TypeError(f"[{type(self).__name__}] state must be a dict, got "
                            f"{type(state).__name__}.")
        self._initialized = False
        self._state = state

    @property
    def step(self) -> mx.array:
        """The number of updates applied so far (a uint64 array in the state)."""
        return self.state["step"]

    @property
    def learning_rate(self) -> mx.array:
        """The current learning rate (an array; a schedule's value at the current step).

        Setting it stores a new constant rate.
        """
        return self.state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array]):
        _check_scalar("learning_rate", learning_rate, type(self).__name__)
        self.state["learning_rate"] = mx.array(learning_rate)

    def _maybe_schedule(self, name: str, param):
        """Store hyper-parameter `name` in the state, as an array; a callable is a schedule,
        called with the step before each update."""
        if callable(param) and not isinstance(param, mx.array):
            self._schedulers[name] = param
            value = param(self.step)
            if not isinstance(value, mx.array):
                value = mx.array(value)
        else:
            _check_scalar(name, param, type(self).__name__)
            value = mx.array(param)
        self.state[name] = value


class MultiOptimizer(Optimizer):
    """Different optimizers for different parameters. `filters[i](path, array)` picks the
    parameters of `optimizers[i]`; the last optimizer (no filter) takes the rest."""

    def __init__(self, optimizers: List[Optimizer], filters: list = ()):
        super().__init__()
        self._state = {}
        filters = list(filters)
        if len(filters) != len(optimizers) - 1:
            raise ValueError(f"Given {len(filters)} filters but {len(optimizers) - 1} needed.")
        self.optimizers = list(optimizers)
        self.filters = filters + [lambda *args, **kwargs: True]

    def _split_dictionary(self, gradients: dict):
        if len(self.optimizers) == 1:
            return [gradients]
        parts = [[] for _ in range(len(self.optimizers))]
        for k, g in tree_flatten(gradients):
            for i, fn in enumerate(self.filters):
                if fn(k, g):
                    parts[i].append((k, g))
                    break
        return [tree_unflatten(p) if p else {} for p in parts]

    def init(self, parameters: dict) -> None:
        for o, p in zip(self.optimizers, self._split_dictionary(parameters)):
            o.init(p)

    def apply_gradients(self, gradients: dict, parameters: dict) -> dict:
        tree = {}
        for o, g in zip(self.optimizers, self._split_dictionary(gradients)):
            tree = tree_merge(tree, o.apply_gradients(g, parameters))
        return tree

    @property
    def state(self) -> dict:
        """The states of the wrapped optimizers, as ``{"states": [state, ...]}``."""
        return {"states": [o.state for o in self.optimizers]}

    @state.setter
    def state(self, state: dict):
        if "states" not in state or len(state["states"]) != len(self.optimizers):
            raise ValueError("Invalid state provided")
        for o, s in zip(self.optimizers, state["states"]):
            o.state = s

    @property
    def learning_rate(self) -> mx.array:
        """The first optimizer's learning rate; setting it sets every optimizer's."""
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array]):
        for o in self.optimizers:
            o.learning_rate = learning_rate


class SGD(Optimizer):
    r"""Stochastic gradient descent: v <- mu v + (1 - tau) g;  w <- w - lr v
    (Nesterov: w <- w - lr (g + mu v)); weight decay adds `weight_decay * w` to g."""

    def __init__(self, learning_rate: LearningRate, momentum: float = 0.0,
                 weight_decay: float = 0.0, dampening: float = 0.0, nesterov: bool = False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening.")
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def init_single(self, parameter: mx.array, state: dict) -> None:
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        if self.momentum <= 0:
            return parameter - self.learning_rate.astype(gradient.dtype) * gradient
        v = self.momentum * state.get("v")
        if self.dampening > 0:
            v += (1 - self.dampening) * gradient
        else:
            v += gradient
        update = gradient + self.momentum * v if self.nesterov else v
        state["v"] = v
        return parameter - self.learning_rate.astype(gradient.dtype) * update


class RMSprop(Optimizer):
    r"""v <- alpha v + (1 - alpha) g^2;  w <- w - lr g / (sqrt(v) + eps)."""

    def __init__(self, learning_rate: LearningRate, alpha: float = 0.99, eps: float = 1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.alpha = alpha
        self.eps = eps
        if self.alpha < 0.0:
            raise ValueError(f"RMSprop alpha should be >=0, {self.alpha} was provided instead")
        if self.eps <= 0.0:
            raise ValueError(f"RMSprop epsilon should be >0, {self.eps} was provided instead")

    def init_single(self, parameter: mx.array, state: dict) -> None:
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        lr = self.learning_rate.astype(gradient.dtype)
        v = self.alpha * state["v"] + (1 - self.alpha) * mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class Adagrad(Optimizer):
    r"""v <- v + g^2;  w <- w - lr g / (sqrt(v) + eps)."""

    def __init__(self, learning_rate: LearningRate, eps: float = 1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        if self.eps <= 0.0:
            raise ValueError(f"Adagrad epsilon should be >0, {self.eps} was provided instead")

    def init_single(self, parameter: mx.array, state: dict) -> None:
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        lr = self.learning_rate.astype(gradient.dtype)
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    r"""v <- rho v + (1-rho) g^2;  d = sqrt(u + eps) / sqrt(v + eps) g;
    u <- rho u + (1-rho) d^2;  w <- w - lr d."""

    def __init__(self, learning_rate: LearningRate, rho: float = 0.9, eps: float = 1e-6):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.rho = rho
        self.eps = eps
        if self.rho < 0.0:
            raise ValueError(f"AdaDelta rho should be >=0, {self.rho} was provided instead")
        if self.eps <= 0.0:
            raise ValueError(f"AdaDelta epsilon should be >0, {self.eps} was provided instead")

    def init_single(self, parameter: mx.array, state: dict) -> None:
        state["v"] = mx.zeros_like(parameter)
        state["u"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        lr = self.learning_rate.astype(gradient.dtype)
        rho, eps = self.rho, self.eps
        v = rho * state["v"] + (1 - rho) * mx.square(gradient)
        d = mx.sqrt(state["u"] + eps) / mx.sqrt(v + eps) * gradient
        u = rho * state["u"] + (1 - rho) * mx.square(d)
        state["v"] = v
        state["u"] = u
        return parameter - lr * d


class Adam(Optimizer):
    r"""m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;  w <- w - lr m / (sqrt(v) + eps).
    With `bias_correction=True`: w <- w - lr/(1-b1^t) m / (sqrt(v)/sqrt(1-b2^t) + eps).
    MLX's default is no bias correction."""

    def __init__(self, learning_rate: LearningRate, betas: List[float] = (0.9, 0.999),
                 eps: float = 1e-8, bias_correction: bool = False):
        super().__init__()
        betas = list(betas)
        if len(betas) != 2:
            raise ValueError(f"{type(self).__name__} betas must be two floats, got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Adam beta{i + 1} should be in [0, 1), {beta} was provided "
                                 f"instead")
        if not 0.0 <= eps:
            raise ValueError(f"Adam epsilon should be >=0, {eps} was provided instead")
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.eps = eps
        self.bias_correction = bias_correction

    def init_single(self, parameter: mx.array, state: dict) -> None:
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        eps = self.eps
        m = b1 * state["m"] + (1 - b1) * gradient
        v = b2 * state["v"] + (1 - b2) * mx.square(gradient)
        state["m"] = m
        state["v"] = v
        if self.bias_correction:
            step = self.step
            c1 = (lr / (1 - b1 ** step)).astype(gradient.dtype)
            c2 = mx.rsqrt(1 - b2 ** step).astype(gradient.dtype)
            return parameter - (c1 * m) / (mx.sqrt(v) * c2 + eps)
        return parameter - lr * m / (mx.sqrt(v) + eps)


class AdamW(Adam):
    r"""Adam with decoupled weight decay: the parameter is first scaled by
    (1 - lr * weight_decay). Default weight_decay 0.01."""

    def __init__(self, learning_rate: LearningRate, betas: List[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01, bias_correction: bool = False):
        super().__init__(learning_rate=learning_rate, betas=betas, eps=eps,
                         bias_correction=bias_correction)
        self.weight_decay = weight_decay

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        lr = self.learning_rate.astype(gradient.dtype)
        return super().apply_single(gradient, parameter * (1 - lr * self.weight_decay), state)


class Adamax(Adam):
    r"""m <- b1 m + (1-b1) g;  v <- max(b2 v, |g|);  w <- w - lr m / (v + eps)."""

    def __init__(self, learning_rate: LearningRate, betas: List[float] = (0.9, 0.999),
                 eps: float = 1e-8):
        super().__init__(learning_rate, betas, eps)

    def init_single(self, parameter: mx.array, state: dict) -> None:
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = mx.maximum(b2 * state["v"], mx.abs(gradient))
        state["m"] = m
        state["v"] = v
        return parameter - lr * m / (v + self.eps)


class Lion(Optimizer):
    r"""c = b1 m + (1-b1) g;  m <- b2 m + (1-b2) g;  w <- w (1 - lr wd) - lr sign(c)."""

    def __init__(self, learning_rate: LearningRate, betas: List[float] = (0.9, 0.99),
                 weight_decay: float = 0.0):
        super().__init__()
        betas = list(betas)
        if len(betas) != 2:
            raise ValueError(f"Lion betas must be two floats, got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Lion beta{i + 1} should be in [0, 1), {beta} was provided "
                                 f"instead")
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.weight_decay = weight_decay

    def init_single(self, parameter: mx.array, state: dict) -> None:
        state["m"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        m = state["m"]
        c = b1 * m + (1 - b1) * gradient
        state["m"] = b2 * m + (1 - b2) * gradient
        if self.weight_decay > 0:
            parameter = (1 - lr * self.weight_decay) * parameter
        return parameter - lr * mx.sign(c)


class Adafactor(Optimizer):
    r"""Adafactor (Shazeer & Stern, 2018) as MLX has it: factored second moments (row and
    column means) for parameters with ndim >= 2, relative step size min(1e-2, 1/sqrt(t)) (or
    1e-6 t with `warmup_init`) scaled by max(eps[1], RMS(w)), update clipping at
    `clip_threshold`, optional first moment `beta_1`, decay 1 - t^decay_rate."""

    def __init__(self, learning_rate: Optional[LearningRate] = None,
                 eps: Tuple[float, float] = (1e-30, 1e-3), clip_threshold: float = 1.0,
                 decay_rate: float = -0.8, beta_1: Optional[float] = None,
                 weight_decay: float = 0.0, scale_parameter: bool = True,
                 relative_step: bool = True, warmup_init: bool = False):
        super().__init__()
        if learning_rate is not None:
            self._maybe_schedule("learning_rate", learning_rate)
        elif not relative_step:
            raise ValueError("Adafactor needs a learning_rate when relative_step=False.")
        eps = tuple(eps)
        if len(eps) != 2:
            raise ValueError(f"Adafactor eps must be a pair of floats, got {eps!r}")
        self.eps = eps
        self.clip_threshold = clip_threshold
        self.decay_rate = decay_rate
        self.beta_1 = beta_1
        self.weight_decay = weight_decay
        self.scale_parameter = scale_parameter
        self.relative_step = relative_step
        self.warmup_init = warmup_init

    def init_single(self, parameter: mx.array, state: dict) -> None:
        if parameter.ndim >= 2:
            shape, dtype = parameter.shape, parameter.dtype
            state["exp_avg_sq_row"] = mx.zeros(shape[:-1], dtype=dtype)
            state["exp_avg_sq_col"] = mx.zeros(shape[:-2] + shape[-1:], dtype=dtype)
        else:
            state["exp_avg_sq"] = mx.zeros_like(parameter)
        if self.beta_1 is not None:
            state["exp_avg"] = mx.zeros_like(parameter)

    def _compute_rms(self, inputs):
        return mx.sqrt(mx.mean(mx.square(inputs)))

    def _compute_learning_rate(self, step, parameter_rms):
        if self.relative_step:
            min_step = 1e-6 * step if self.warmup_init else 1e-2
            relative_step_size = mx.minimum(min_step, mx.rsqrt(step))
        else:
            relative_step_size = self.learning_rate
        relative_step_size = relative_step_size.astype(parameter_rms.dtype)
        parameter_scale = 1.0
        if self.scale_parameter:
            parameter_scale = mx.maximum(self.eps[1], parameter_rms)
        return parameter_scale * relative_step_size

    def _approximate_exp_moving_avg(self, exp_avg_sq_row, exp_avg_sq_col):
        r_factor = mx.rsqrt(exp_avg_sq_row / mx.mean(exp_avg_sq_row, axis=-1, keepdims=True))
        c_factor = mx.rsqrt(exp_avg_sq_col)
        return mx.expand_dims(r_factor, axis=-1) * mx.expand_dims(c_factor, axis=-2)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        factored = gradient.ndim >= 2
        step = self.step
        parameter_rms = self._compute_rms(parameter)
        learning_rate = self._compute_learning_rate(step, parameter_rms)
        beta_2 = 1.0 - (step ** self.decay_rate).astype(parameter_rms.dtype)
        update = mx.square(gradient) + self.eps[0]
        if factored:
            row = beta_2 * state["exp_avg_sq_row"] + (1 - beta_2) * mx.mean(update, axis=-1)
            col = beta_2 * state["exp_avg_sq_col"] + (1 - beta_2) * mx.mean(update, axis=-2)
            state["exp_avg_sq_row"] = row
            state["exp_avg_sq_col"] = col
            update = self._approximate_exp_moving_avg(row, col) * gradient
        else:
            exp_avg_sq = beta_2 * state["exp_avg_sq"] + (1 - beta_2) * update
            state["exp_avg_sq"] = exp_avg_sq
            update = mx.rsqrt(exp_avg_sq) * gradient
        update = update / mx.maximum(1.0, self._compute_rms(update) / self.clip_threshold)
        update = learning_rate * update
        if self.beta_1 is not None:
            exp_avg = self.beta_1 * state["exp_avg"] + (1 - self.beta_1) * update
            state["exp_avg"] = exp_avg
            update = exp_avg
        if self.weight_decay != 0:
            parameter = parameter + parameter * (-self.weight_decay * learning_rate)
        return parameter - update


class Muon(Optimizer):
    r"""Muon (momentum orthogonalised by Newton-Schulz) as MLX has it: SGD-momentum whose
    update of a >=2-D parameter is replaced by an approximate orthogonalisation (5 quintic
    Newton-Schulz steps), scaled by sqrt(max(1, rows/cols))."""

    def __init__(self, learning_rate: LearningRate, momentum: float = 0.95,
                 weight_decay: float = 0.01, nesterov: bool = True, ns_steps: int = 5):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.ns_steps = ns_steps

    def init_single(self, parameter: mx.array, state: dict) -> None:
        state["v"] = mx.zeros_like(parameter)

    def _zeropower_via_newtonschulz5(self, X, steps: int):
        a, b, c = (3.4445, -4.7750, 2.0315)
        transpose_needed = X.shape[-2] > X.shape[-1]
        if transpose_needed:
            X = X.T
        X = X / (mx.sqrt(mx.sum(mx.square(X), keepdims=True)) + 1e-7)
        for _ in range(steps):
            A = X @ X.T
            B = mx.addmm(b * A, A, A, beta=1.0, alpha=c)
            X = mx.addmm(a * X, B, X, beta=1.0, alpha=1.0)
        if transpose_needed:
            X = X.T
        return X

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict) -> mx.array:
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        v = self.momentum * state["v"] + (1 - self.momentum) * gradient
        state["v"] = v
        if self.nesterov:
            update = gradient * (1 - self.momentum) + v * self.momentum
        else:
            update = v
        lr = self.learning_rate.astype(gradient.dtype)
        if update.ndim >= 2:
            original_shape = update.shape
            if update.ndim > 2:
                update = mx.reshape(update, (update.shape[0], -1))
            update = self._zeropower_via_newtonschulz5(update, steps=self.ns_steps)
            update = mx.reshape(update, original_shape)
            lr = lr * math.sqrt(max(1, update.shape[-2] / update.shape[-1]))
        return parameter - lr * update


def clip_grad_norm(grads: Any, max_norm: float) -> Tuple[Any, mx.array]:
    """Scale a tree of gradients so their global L2 norm is at most `max_norm`.

    Returns `(clipped_grads, total_norm)`; total_norm is the norm before clipping (an array).
    The scale is min(max_norm / (total_norm + 1e-6), 1); float16 squares are summed in float32.
    """
    if isinstance(max_norm, bool) or not isinstance(max_norm, (Real, mx.array)):
        raise TypeError(f"max_norm must be a float, got {type(max_norm).__name__}")
    if not isinstance(max_norm, mx.array) and max_norm < 0:
        raise ValueError(f"max_norm should be >=0, {max_norm} was provided instead")
    for path, g in tree_flatten(grads):
        if not isinstance(g, mx.array):
            raise TypeError(f"[clip_grad_norm] gradient '{path}' must be an array, got "
                            f"{type(g).__name__}.")

    def squared_norm(g):
        if g.dtype == mx.float16:
            g = g.astype(mx.float32)
        return g.square().sum()

    def scale(g):
        if mx.issubdtype(g.dtype, mx.floating):
            return (g * normalizer).astype(g.dtype)
        return g * normalizer

    norm_squared = tree_reduce(lambda acc, g: acc + squared_norm(g), grads, 0.0)
    total_norm = mx.sqrt(norm_squared)
    normalizer = mx.minimum(max_norm / (total_norm + 1e-6), 1.0)
    return tree_map(scale, grads), total_norm
