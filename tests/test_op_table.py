"""Forward tests for every op table entry and dtype, against a NumPy reference."""
import numpy as np
import pytest

import braze.core as mx

from op_table import all_cases

CASES = all_cases()

LOW_PRECISION = {"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}


def _params():
    for c in CASES:
        for dt in c.dtypes:
            yield pytest.param(c, dt, id=f"{c.id}-{dt}")


def _to_ref(x, case):
    if case.ref_float64 and x.dtype.kind == "f" or str(x.dtype) == "bfloat16":
        return x.astype(np.float64)
    return x


def to_mx(x):
    """NumPy sample input -> braze array of the same dtype (float64 kept, unlike mx.array's
    default); other values pass through."""
    if not isinstance(x, np.ndarray):
        return x
    return mx.array(x, dtype=mx.float64) if x.dtype == np.float64 else mx.array(x)


def _listify(r):
    return list(r) if isinstance(r, (list, tuple)) else [r]


@pytest.mark.parametrize("case,dt", list(_params()))
def test_forward(case, dt):
    rng = np.random.default_rng(0)
    ins = case.inputs(rng, dt)
    originals = [np.array(x, copy=True) for x in ins]
    got = _listify(case.mx_fn(*[to_mx(x) for x in ins]))
    want = _listify(case.np_fn(*[_to_ref(x, case) if isinstance(x, np.ndarray) else x
                                 for x in ins]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, mx.array), f"{case.id} returned {type(g)}"
        w = np.asarray(w)
        exp_dt = case.out_dtype(dt) if case.out_dtype else dt
        assert g.dtype.name == ("bool" if exp_dt == "bool_" else exp_dt), (case.id, g.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        gn = np.asarray(g)
        if case.exact or g.dtype.kind in "bui":
            np.testing.assert_array_equal(gn, w.astype(gn.dtype) if w.dtype != gn.dtype else w)
        else:
            rtol, atol = LOW_PRECISION.get(g.dtype.name, (case.rtol, case.atol))
            np.testing.assert_allclose(gn.astype(np.complex128 if gn.dtype.kind == "c"
                                                 else np.float64), w, rtol=max(rtol, case.rtol),
                                       atol=max(atol, case.atol), equal_nan=True)
    for x, o in zip(ins, originals):  # inputs are never modified (bytes: NaN-safe)
        if isinstance(x, np.ndarray):
            assert x.tobytes() == o.tobytes(), f"{case.id} modified its input"
