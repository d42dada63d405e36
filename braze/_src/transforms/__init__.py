"""Function transformations: vjp, jvp, grad, value_and_grad (autodiff.py) and vmap (vmap.py)."""
from ..prims import fast as _fast
from .autodiff import expanded_jvp as _expanded_jvp
from .autodiff import expanded_vjp as _expanded_vjp
from .vmap import expanded_vmap as _expanded_vmap

# the mx.fast primitives define the rules they do not do natively by their composite graphs
_fast.set_expanders(_expanded_vjp, _expanded_jvp, _expanded_vmap)
