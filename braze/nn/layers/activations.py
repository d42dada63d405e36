"""Activation functions and their module classes, with MLX's formulas.

Like MLX, the elementwise ones are wrapped in `mx.compile(shapeless=True)`, so each becomes
one fused kernel whatever the input shape.
"""
from __future__ import annotations

import math
from functools import partial

import braze.core as mx

from .base import Module

__all__ = [
    "sigmoid", "relu", "relu2", "relu6", "leaky_relu", "log_softmax", "elu", "softmax",
    "softplus", "softsign", "softshrink", "celu", "silu", "log_sigmoid", "gelu",
    "gelu_approx", "gelu_fast_approx", "glu", "step", "selu", "prelu", "mish", "hardswish",
    "hard_tanh", "hard_shrink", "softmin", "tanh",
    "GLU", "Sigmoid", "Mish", "ReLU", "ReLU2", "ReLU6", "LeakyReLU", "ELU", "Softmax",
    "Softplus", "Softsign", "Softshrink", "CELU", "SiLU", "LogSoftmax", "LogSigmoid", "PReLU",
    "GELU", "Tanh", "Hardswish", "Step", "SELU", "HardTanh", "HardShrink", "Softmin",
]


def _compiled(fn):
    if hasattr(mx, "compile"):
        return partial(mx.compile, shapeless=True)(fn)
    return fn


@_compiled
def sigmoid(x):
    r"""Logistic sigmoid 1 / (1 + exp(-x))."""
    return mx.sigmoid(x)


@_compiled
def relu(x):
    """max(x, 0)."""
    return mx.maximum(x, 0)


@_compiled
def relu2(x):
    """max(x, 0) ** 2."""
    return mx.square(mx.maximum(x, 0))


@_compiled
def relu6(x):
    """min(max(x, 0), 6)."""
    return mx.minimum(mx.maximum(x, 0), 6.0)


@_compiled
def leaky_relu(x, negative_slope=0.01):
    """max(negative_slope * x, x)."""
    return mx.maximum(negative_slope * x, x)


@_compiled
def log_softmax(x, axis=-1):
    """x - logsumexp(x) along `axis`."""
    x = x - mx.stop_gradient(mx.max(x, axis=axis, keepdims=True))
    return x - mx.logsumexp(x, axis=axis, keepdims=True)


@_compiled
def elu(x, alpha=1.0):
    """x if x > 0 else alpha * (exp(x) - 1)."""
    return mx.where(x > 0, x, alpha * (mx.exp(x) - 1))


@_compiled
def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`."""
    return mx.softmax(x, axis=axis)


@_compiled
def softplus(x):
    """log(1 + exp(x))."""
    return mx.logaddexp(x, 0)


@_compiled
def softsign(x):
    """x / (1 + |x|)."""
    return mx.divide(x, 1 + mx.abs(x))


@_compiled
def softshrink(x, lambd: float = 0.5):
    """x - sign(x) * lambd where |x| > lambd, else 0."""
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


@_compiled
def celu(x, alpha=1.0):
    """max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1)."""
    return mx.maximum(x, 0.0) + alpha * (mx.exp(mx.minimum(x, 0.0) / alpha) - 1)


@_compiled
def silu(x):
    """x * sigmoid(x)."""
    return x * mx.sigmoid(x)


@_compiled
def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-x)


@_compiled
def gelu(x):
    """x * Phi(x) with the exact Gaussian CDF."""
    return x * (1 + mx.erf(x / math.sqrt(2))) / 2


@_compiled
def gelu_approx(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1 + mx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@_compiled
def gelu_fast_approx(x):
    """x * sigmoid(1.702 x)."""
    return x * mx.sigmoid(1.702 * x)


def glu(x: mx.array, axis: int = -1) -> mx.array:
    """a * sigmoid(b) where a, b are the two halves of x along `axis`."""
    a, b = mx.split(x, indices_or_sections=2, axis=axis)
    return a * mx.sigmoid(b)


@_compiled
def step(x, threshold: float = 0.0):
    """1 where x >= threshold else 0."""
    return mx.where(x >= threshold, 1, 0)


@_compiled
def selu(x):
    """1.0507 * elu(x, 1.67326)."""
    return elu(x, 1.67326) * 1.0507


@_compiled
def prelu(x, alpha):
    """max(0, x) + alpha * min(0, x)."""
    return mx.maximum(0, x) + alpha * mx.minimum(0, x)


@_compiled
def mish(x):
    """x * tanh(softplus(x))."""
    return x * mx.tanh(softplus(x))


@_compiled
def hardswish(x):
    """x * min(max(x + 3, 0), 6) / 6."""
    max_x_3 = mx.maximum(x + 3, 0)
    return x * mx.minimum(max_x_3, 6) / 6


@_compiled
def hard_tanh(x, min_val=-1.0, max_val=1.0):
    """min(max(x, min_val), max_val)."""
    return mx.minimum(mx.maximum(x, min_val), max_val)


@_compiled
def hard_shrink(x, lambd=0.5):
    """x where |x| > lambd, else 0."""
    return mx.where(mx.abs(x) > lambd, x, 0)


@_compiled
def softmin(x, axis=-1):
    """softmax(-x) along `axis`."""
    return mx.softmax(-x, axis=axis)


def tanh(x: mx.array) -> mx.array:
    """Hyperbolic tangent."""
    return mx.tanh(x)


# -- modules ----------------------------------------------------------------------------------
def _module(fn, doc=None):
    def decorator(klass):
        klass.__call__ = lambda self, x: fn(x)
        klass.__doc__ = doc or f"Applies :func:`{fn.__name__ if hasattr(fn, '__name__') else fn}`."
        return klass
    return decorator


@_module(sigmoid)
class Sigmoid(Module):
    pass


@_module(mish)
class Mish(Module):
    pass


@_module(relu)
class ReLU(Module):
    pass


@_module(relu2)
class ReLU2(Module):
    pass


@_module(relu6)
class ReLU6(Module):
    pass


@_module(softmax)
class Softmax(Module):
    pass


@_module(softplus)
class Softplus(Module):
    pass


@_module(softsign)
class Softsign(Module):
    pass


@_module(silu)
class SiLU(Module):
    pass


@_module(log_softmax)
class LogSoftmax(Module):
    pass


@_module(log_sigmoid)
class LogSigmoid(Module):
    pass


@_module(tanh)
class Tanh(Module):
    pass


@_module(hardswish)
class Hardswish(Module):
    pass


@_module(selu)
class SELU(Module):
    pass


@_module(hard_tanh)
class HardTanh(Module):
    pass


@_module(softmin)
class Softmin(Module):
    pass


class GLU(Module):
    """Gated linear unit along `axis`."""

    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = axis

    def __call__(self, x):
        return glu(x=x, axis=self.axis)


class LeakyReLU(Module):
    """max(negative_slope * x, x)."""

    def __init__(self, negative_slope: float = 1e-2):
        super().__init__()
        self._negative_slope = negative_slope

    def __call__(self, x):
        return leaky_relu(x, self._negative_slope)


class ELU(Module):
    """Exponential linear unit."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return elu(x, self._alpha)


class Softshrink(Module):
    """Soft shrinkage by `lambd`."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return softshrink(x, self.lambd)


class CELU(Module):
    """Continuously differentiable ELU."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return celu(x, self._alpha)


class PReLU(Module):
    """Parametric ReLU with a learnable slope per channel (`num_parameters`)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25):
        super().__init__()
        self.weight = mx.full([num_parameters], init)

    def __call__(self, x):
        return prelu(x, self.weight)


class GELU(Module):
    """GELU; `approx` is "none", "precise"/"tanh" (gelu_approx) or "fast"."""

    def __init__(self, approx: str = "none"):
        super().__init__()
        if approx == "none":
            self._act = gelu
        elif approx in ("precise", "tanh"):
            self._act = gelu_approx
        elif approx == "fast":
            self._act = gelu_fast_approx
        else:
            raise ValueError(f"The approximation should be in ['none', 'precise', 'tanh', "
                             f"'fast'] but '{approx}' was given")

    def __call__(self, x):
        return self._act(x)


class Step(Module):
    """1 where x >= threshold else 0."""

    def __init__(self, threshold: float = 0.0):
        super().__init__()
        self.threshold = threshold

    def __call__(self, x):
        return step(x, self.threshold)


class HardShrink(Module):
    """Hard shrinkage by `lambd`."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return hard_shrink(x, self.lambd)
