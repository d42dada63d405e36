"""Issue 3's acceptance test: every registered primitive has its transformation rules.

Every primitive must override `vmap` (there is no generic "loop over the batch" fallback), and
either declare `differentiable = False` (its inputs get zero gradients, as in MLX) or override
both `vjp` and `jvp`.
"""
import pytest

import braze.core  # noqa: F401  (imports every op family, so the registry is complete)
from braze._src.prims.base import REGISTRY, Primitive


def _overrides(cls, rule):
    return getattr(cls, rule) is not getattr(Primitive, rule)


def _missing(cls):
    missing = [] if _overrides(cls, "vmap") else ["vmap"]
    if cls.differentiable:
        missing += [r for r in ("vjp", "jvp") if not _overrides(cls, r)]
    return missing


def test_registry_is_populated():
    assert len(REGISTRY) > 50
    for name in ("Copy", "AsType", "Broadcast", "CustomTransforms", "StopGradient"):
        assert name in REGISTRY


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_primitive_has_transform_rules(name):
    cls = REGISTRY[name]
    missing = _missing(cls)
    assert not missing, (f"{name} is missing transform rules {missing}; implement them or set "
                         f"`differentiable = False` if it has no derivative.")


def test_every_primitive_has_transform_rules():
    """One summary assertion listing everything still missing."""
    missing = {n: _missing(c) for n, c in sorted(REGISTRY.items()) if _missing(c)}
    assert not missing, f"primitives missing transform rules: {missing}"


def test_stop_gradient_is_declared_non_differentiable():
    assert REGISTRY["StopGradient"].differentiable is False
