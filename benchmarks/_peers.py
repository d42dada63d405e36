"""The workloads of `compile_bench.py`, written the natural way for each library.

Every workload takes its inputs positionally (float32 arrays) and returns one array, or for
`adam` the new state `(p, m, v)`. A *variant* wraps one library in one mode (eager or compiled)
and knows how to convert NumPy inputs, wait for results and read them back. Peers are optional:
`load(name)` raises ImportError when the library is not installed, and the caller drops that
column.

"Natural" means each library's own builtins where it has them (`torch.nn.functional.gelu`,
`jax.nn.softmax`, `mlx.core.fast.layer_norm`, ...) and plain expressions otherwise; torch's
eager Adam updates in place as `torch.optim.Adam` does, `jax.jit` donates the optimizer state,
braze and MLX return fresh arrays that the caller rebinds (which lets braze donate).
"""
from __future__ import annotations

import math

import numpy as np

WORKLOADS = ("gelu", "gelu_tanh", "silu", "chain", "softmax", "layernorm", "rmsnorm", "adam")
ROWWISE = ("softmax", "layernorm", "rmsnorm")
ROW = 4096  # row length of the row-wise workloads (shorter rows only when n < ROW)

INV_SQRT2 = 1.0 / math.sqrt(2.0)
TANH_C = math.sqrt(2.0 / math.pi)
NORM_EPS = 1e-5
# one Adam step at t = 10: m' = b1 m + (1-b1) g, v' = b2 v + (1-b2) g^2,
# p' = p - A m' / (sqrt(v') S + eps) with A = lr / (1 - b1^t), S = 1 / sqrt(1 - b2^t)
LR, B1, B2, EPS, STEP = 1e-3, 0.9, 0.999, 1e-8, 10
ADAM_A = LR / (1.0 - B1 ** STEP)
ADAM_S = 1.0 / math.sqrt(1.0 - B2 ** STEP)


# -- inputs, reference, traffic ---------------------------------------------------------------
def shape_of(workload: str, n: int) -> tuple:
    if workload in ROWWISE:
        cols = min(n, ROW)
        return (max(1, n // cols), cols)
    return (n,)


def make_inputs(workload: str, n: int, seed: int = 0) -> tuple:
    """NumPy float32 inputs for one workload at n elements."""
    rng = np.random.default_rng(seed)
    shape = shape_of(workload, n)

    def f32(a):
        return np.ascontiguousarray(a, dtype=np.float32)

    if workload in ("gelu", "gelu_tanh", "silu"):
        return (f32(rng.uniform(-5.0, 5.0, shape)),)
    if workload == "chain":
        return (f32(rng.random(shape)), f32(rng.random(shape)))
    if workload == "softmax":
        return (f32(rng.normal(0.0, 2.0, shape)),)
    if workload == "layernorm":
        cols = shape[-1]
        return (f32(rng.normal(0.5, 2.0, shape)), f32(rng.normal(1.0, 0.2, cols)),
                f32(rng.normal(0.0, 0.2, cols)))
    if workload == "rmsnorm":
        return (f32(rng.normal(0.5, 2.0, shape)), f32(rng.normal(1.0, 0.2, shape[-1])))
    if workload == "adam":
        return (f32(rng.normal(0.0, 1.0, shape)), f32(rng.normal(0.0, 0.01, shape)),
                f32(rng.uniform(0.0, 1e-4, shape)), f32(rng.normal(0.0, 0.01, shape)))
    raise KeyError(workload)


def bytes_moved(workload: str, n: int) -> int:
    """Bytes a perfect kernel must read and write (float32): full-size inputs + outputs, plus
    the per-column parameters of the norms."""
    cols = shape_of(workload, n)[-1]
    full = {"gelu": 2, "gelu_tanh": 2, "silu": 2, "chain": 3, "softmax": 2, "layernorm": 2,
            "rmsnorm": 2, "adam": 7}[workload]
    params = {"layernorm": 2, "rmsnorm": 1}.get(workload, 0)
    return 4 * (full * n + params * cols)


def _erf64(x):
    try:
        from scipy.special import erf
        return erf(x)
    except ImportError:  # pragma: no cover - scipy is usually there
        return np.frompyfunc(math.erf, 1, 1)(x).astype(x.dtype)


def reference(workload: str, inputs: tuple) -> tuple:
    """The outputs in float64, from the float32 inputs."""
    a = [np.asarray(x, np.float64) for x in inputs]
    if workload == "gelu":
        return (_np_gelu(a[0], _erf64),)
    return _as_tuple(NUMPY[workload](*a))


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


# -- NumPy (and the float64 reference) --------------------------------------------------------
def _np_gelu(x, erf):
    return x * (1.0 + erf(x * INV_SQRT2)) * 0.5


def _np_chain(x, y):
    z = x + y
    z = z * x
    z = z - y
    z = np.exp(z)
    z = z * 0.5
    z = z + x
    z = np.maximum(z, y)
    z = z / 3.0
    z = -z
    return z * z


def _np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_layernorm(x, w, b):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + NORM_EPS) * w + b


def _np_rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + NORM_EPS) * w


def _np_adam(p, m, v, g):
    m = B1 * m + (1.0 - B1) * g
    v = B2 * v + (1.0 - B2) * (g * g)
    p = p - ADAM_A * m / (np.sqrt(v) * ADAM_S + EPS)
    return p, m, v


def _np_gelu32(x):
    from scipy.special import erf  # NumPy has no erf; SciPy's is the natural companion
    return _np_gelu(x, erf)


NUMPY = {
    "gelu": _np_gelu32,
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(TANH_C * (x + 0.044715 * (x * x * x)))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "chain": _np_chain,
    "softmax": _np_softmax,
    "layernorm": _np_layernorm,
    "rmsnorm": _np_rmsnorm,
    "adam": _np_adam,
}


# -- the MLX-style API (braze and MLX share these formulas) -----------------------------------
def mx_style(ns, fast=None):
    """Workloads written against an MLX-compatible namespace `ns` (braze.core or mlx.core).
    `fast` is `mlx.core.fast` when the library has fused norms."""

    def gelu(x):
        return x * (1 + ns.erf(x * INV_SQRT2)) * 0.5

    def gelu_tanh(x):
        return 0.5 * x * (1 + ns.tanh(TANH_C * (x + 0.044715 * (x * x * x))))

    def silu(x):
        return x * ns.sigmoid(x)

    def chain(x, y):
        z = x + y
        z = z * x
        z = z - y
        z = ns.exp(z)
        z = z * 0.5
        z = z + x
        z = ns.maximum(z, y)
        z = z / 3.0
        z = -z
        return z * z

    def softmax(x):
        return ns.softmax(x, axis=-1)

    def layernorm(x, w, b):
        if fast is not None:
            return fast.layer_norm(x, w, b, NORM_EPS)
        mean = ns.mean(x, axis=-1, keepdims=True)
        var = ns.var(x, axis=-1, keepdims=True)
        return (x - mean) * ns.rsqrt(var + NORM_EPS) * w + b

    def rmsnorm(x, w):
        if fast is not None:
            return fast.rms_norm(x, w, NORM_EPS)
        return x * ns.rsqrt(ns.mean(ns.square(x), axis=-1, keepdims=True) + NORM_EPS) * w

    def adam(p, m, v, g):
        m = B1 * m + (1 - B1) * g
        v = B2 * v + (1 - B2) * ns.square(g)
        p = p - ADAM_A * m / (ns.sqrt(v) * ADAM_S + EPS)
        return p, m, v

    return dict(gelu=gelu, gelu_tanh=gelu_tanh, silu=silu, chain=chain, softmax=softmax,
                layernorm=layernorm, rmsnorm=rmsnorm, adam=adam)


# -- variants ---------------------------------------------------------------------------------
class Variant:
    """One library in one mode. `build(workload)` returns a callable or None (not supported)."""

    key = ""
    lib = ""
    compiled = False
    version = ""

    def build(self, workload):
        raise NotImplementedError

    def convert(self, arrays):
        return tuple(np.array(a, copy=True) for a in arrays)

    def sync(self, out):
        pass

    def to_numpy(self, out):
        return tuple(np.asarray(o) for o in _as_tuple(out))


class NumpyVariant(Variant):
    key, lib = "numpy", "numpy"

    def __init__(self):
        self.version = np.__version__

    def build(self, workload):
        if workload == "gelu":
            try:
                import scipy.special  # noqa: F401
            except ImportError:
                return None
        return NUMPY[workload]


class BrazeVariant(Variant):
    lib = "braze"

    def __init__(self, compiled):
        import braze
        import braze.core as bz
        self.bz = bz
        self.compiled = compiled
        self.key = "braze.c" if compiled else "braze"
        self.version = braze.__version__
        self.fns = mx_style(bz)

    def build(self, workload):
        f = self.fns[workload]
        return self.bz.compile(f) if self.compiled else f

    def convert(self, arrays):
        # a private copy: donation may write into it
        return tuple(self.bz.array(np.array(a, copy=True)) for a in arrays)

    def sync(self, out):
        self.bz.eval(out)

    def to_numpy(self, out):
        return tuple(np.array(o) for o in _as_tuple(out))


class MlxVariant(Variant):
    lib = "mlx"

    def __init__(self, compiled):
        import mlx.core as mlx
        self.m = mlx
        self.compiled = compiled
        self.key = "mlx.c" if compiled else "mlx"
        self.version = getattr(mlx, "__version__", "")
        self.fns = mx_style(mlx, fast=mlx.fast)

    def build(self, workload):
        f = self.fns[workload]
        return self.m.compile(f) if self.compiled else f

    def convert(self, arrays):
        return tuple(self.m.array(a) for a in arrays)

    def sync(self, out):
        self.m.eval(out)

    def to_numpy(self, out):
        return tuple(np.array(o) for o in _as_tuple(out))


class NumexprVariant(Variant):
    key, lib = "numexpr", "numexpr"

    def __init__(self):
        import numexpr
        self.ne = numexpr
        self.version = numexpr.__version__

    def build(self, workload):
        ev = self.ne.evaluate
        f32 = np.float32
        # float constants go in as float32 scalars, or numexpr computes in float64

        def gelu_tanh(x):
            return ev("h*x*(1+tanh(c*(x+k*x*x*x)))",
                      local_dict=dict(x=x, h=f32(0.5), c=f32(TANH_C), k=f32(0.044715)))

        def silu(x):
            return ev("x/(1+exp(-x))", local_dict=dict(x=x))

        def chain(x, y):
            a = ev("exp((x+y)*x-y)*h+x", local_dict=dict(x=x, y=y, h=f32(0.5)))
            return ev("where(a>y,a,y)*where(a>y,a,y)/9", local_dict=dict(a=a, y=y))

        def softmax(x):
            m = x.max(axis=-1, keepdims=True)
            e = ev("exp(x-m)", local_dict=dict(x=x, m=m))
            s = e.sum(axis=-1, keepdims=True)
            return ev("e/s", local_dict=dict(e=e, s=s))

        def layernorm(x, w, b):
            mean = x.mean(axis=-1, keepdims=True)
            var = x.var(axis=-1, keepdims=True)
            return ev("(x-mean)/sqrt(var+eps)*w+b",
                      local_dict=dict(x=x, mean=mean, var=var, w=w, b=b, eps=f32(NORM_EPS)))

        def rmsnorm(x, w):
            ms = ev("x*x", local_dict=dict(x=x)).mean(axis=-1, keepdims=True)
            return ev("x/sqrt(ms+eps)*w", local_dict=dict(x=x, ms=ms, w=w, eps=f32(NORM_EPS)))

        def adam(p, m, v, g):
            c = dict(b1=f32(B1), c1=f32(1 - B1), b2=f32(B2), c2=f32(1 - B2), a=f32(ADAM_A),
                     s=f32(ADAM_S), eps=f32(EPS))
            ev("b1*m+c1*g", local_dict=dict(m=m, g=g, **c), out=m)
            ev("b2*v+c2*g*g", local_dict=dict(v=v, g=g, **c), out=v)
            ev("p-a*m/(sqrt(v)*s+eps)", local_dict=dict(p=p, m=m, v=v, **c), out=p)
            return p, m, v

        return dict(gelu_tanh=gelu_tanh, silu=silu, chain=chain, softmax=softmax,
                    layernorm=layernorm, rmsnorm=rmsnorm, adam=adam).get(workload)  # no erf


class JaxVariant(Variant):
    lib = "jax"

    def __init__(self, compiled):
        import jax
        import jax.numpy as jnp
        self.jax, self.jnp = jax, jnp
        self.compiled = compiled
        self.key = "jax.jit" if compiled else "jax"
        self.version = jax.__version__

    def build(self, workload):
        jax, jnp = self.jax, self.jnp
        lax = jax.lax

        def chain(x, y):
            z = x + y
            z = z * x
            z = z - y
            z = jnp.exp(z)
            z = z * 0.5
            z = z + x
            z = jnp.maximum(z, y)
            z = z / 3.0
            z = -z
            return z * z

        def layernorm(x, w, b):
            mean = jnp.mean(x, axis=-1, keepdims=True)
            var = jnp.var(x, axis=-1, keepdims=True)
            return (x - mean) * lax.rsqrt(var + NORM_EPS) * w + b

        def rmsnorm(x, w):
            return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + NORM_EPS) * w

        def adam(p, m, v, g):
            m = B1 * m + (1 - B1) * g
            v = B2 * v + (1 - B2) * (g * g)
            p = p - ADAM_A * m / (jnp.sqrt(v) * ADAM_S + EPS)
            return p, m, v

        fns = dict(
            gelu=lambda x: jax.nn.gelu(x, approximate=False),
            gelu_tanh=lambda x: jax.nn.gelu(x, approximate=True),
            silu=jax.nn.silu, chain=chain, softmax=lambda x: jax.nn.softmax(x, axis=-1),
            layernorm=layernorm, rmsnorm=rmsnorm, adam=adam)
        f = fns[workload]
        if not self.compiled:
            return f
        if workload == "adam":
            return jax.jit(f, donate_argnums=(0, 1, 2))
        return jax.jit(f)

    def convert(self, arrays):
        return tuple(self.jax.device_put(np.array(a, copy=True)) for a in arrays)

    def sync(self, out):
        self.jax.block_until_ready(out)


class TorchVariant(Variant):
    lib = "torch"

    def __init__(self, compiled):
        import torch
        import torch.nn.functional as F
        self.torch, self.F = torch, F
        self.compiled = compiled
        self.key = "torch.c" if compiled else "torch"
        self.version = torch.__version__

    def build(self, workload):
        torch, F = self.torch, self.F

        def chain(x, y):
            z = x + y
            z = z * x
            z = z - y
            z = torch.exp(z)
            z = z * 0.5
            z = z + x
            z = torch.maximum(z, y)
            z = z / 3.0
            z = -z
            return z * z

        def adam(p, m, v, g):
            # torch.optim.Adam's single-tensor step, in place
            m.lerp_(g, 1 - B1)
            v.mul_(B2).addcmul_(g, g, value=1 - B2)
            denom = v.sqrt().mul_(ADAM_S).add_(EPS)
            p.addcdiv_(m, denom, value=-ADAM_A)
            return p, m, v

        fns = dict(
            gelu=lambda x: F.gelu(x),
            gelu_tanh=lambda x: F.gelu(x, approximate="tanh"),
            silu=lambda x: F.silu(x), chain=chain,
            softmax=lambda x: torch.softmax(x, dim=-1),
            layernorm=lambda x, w, b: F.layer_norm(x, w.shape, w, b, NORM_EPS),
            rmsnorm=lambda x, w: F.rms_norm(x, w.shape, w, NORM_EPS),
            adam=adam)
        f = fns[workload]
        if not self.compiled:
            return f
        torch._dynamo.reset()  # each (workload, shape) gets its own static-shape compile
        return torch.compile(f)

    def convert(self, arrays):
        return tuple(self.torch.from_numpy(np.array(a, copy=True)) for a in arrays)

    def to_numpy(self, out):
        return tuple(o.detach().numpy() for o in _as_tuple(out))


VARIANTS = ("braze.c", "braze", "numpy", "numexpr", "mlx", "mlx.c", "jax", "jax.jit", "torch",
            "torch.c")
COMPILED = ("braze.c", "mlx.c", "jax.jit", "torch.c")


def load(key: str) -> Variant:
    """The variant called `key`; ImportError when its library is not installed."""
    if key == "numpy":
        return NumpyVariant()
    if key == "numexpr":
        return NumexprVariant()
    lib, _, mode = key.partition(".")
    cls = {"braze": BrazeVariant, "mlx": MlxVariant, "jax": JaxVariant,
           "torch": TorchVariant}.get(lib)
    if cls is None:
        raise KeyError(f"unknown variant {key!r}; known: {', '.join(VARIANTS)}")
    return cls(compiled=bool(mode))
