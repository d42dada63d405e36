"""`mx.random`: MLX's random namespace (re-exported from braze._src.random).

`state` is registered with compile as implicit state: a compiled function that draws from the
global key without declaring `mx.random.state` still advances the key, like the uncompiled
function would (braze differs from MLX here on purpose; see docs/compile.md).
"""
import braze._src.random as _random
from braze._src.compile.api import compile as _compile
from braze._src.compile.api import register_implicit_state as _register
from braze._src.random import (  # noqa: F401
    bernoulli,
    bits,
    categorical,
    gumbel,
    key,
    laplace,
    multivariate_normal,
    normal,
    permutation,
    randint,
    seed,
    split,
    state,
    truncated_normal,
    uniform,
)

_register(state)
_random.COMPILE[0] = _compile  # eager draws compile their elementwise tails (the layers below
# compile cannot import it)
