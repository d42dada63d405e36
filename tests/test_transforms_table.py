"""Every op of the op table under the transforms: vjp against central finite differences,
the jvp/vjp identity <J t, c> = <t, J^T c>, and vmap against a Python loop plus stack."""
import numpy as np
import pytest

import braze.core as mx

from op_table import all_cases

CASES = all_cases()
EPS = 1e-6


def _float_case_inputs(case):
    """Sample inputs in float64 (float32 when the op has no float64 variant)."""
    for dt in ("float64", "float32"):
        if dt in case.dtypes:
            return dt, case.inputs(np.random.default_rng(0), dt)
    return None, None


def _diff_positions(case, ins):
    if case.grad_inputs is not None:
        return list(case.grad_inputs)
    return [i for i, x in enumerate(ins) if isinstance(x, np.ndarray) and x.dtype.kind == "f"]


def _wrap(x):
    if not isinstance(x, np.ndarray):
        return x
    return mx.array(x, dtype=mx.float64) if x.dtype == np.float64 else mx.array(x)


def _outputs(r):
    return list(r) if isinstance(r, (list, tuple)) else [r]


def _grad_params():
    for c in CASES:
        if c.differentiable:
            dt, ins = _float_case_inputs(c)
            if dt is not None and _diff_positions(c, ins):
                yield pytest.param(c, id=c.id)


def _vmap_params():
    for c in CASES:
        dt = next((d for d in ("float32", "float64", "int32") if d in c.dtypes), c.dtypes[0])
        yield pytest.param(c, dt, id=f"{c.id}-{dt}")


def _scalarized(case, ins, pos, cots):
    """f(diff inputs) = sum_k <out_k, cot_k>, as a braze function of the diff inputs."""
    def f(*diff):
        args = [_wrap(x) for x in ins]
        for p, d in zip(pos, diff):
            args[p] = d
        outs = _outputs(case.mx_fn(*args))
        total = None
        for o, c in zip(outs, cots):
            if o.dtype.kind != "f":
                continue
            # infinite outputs (an exclusive cummax's identity slot, inf edge inputs) would make
            # the loss infinite and the finite differences NaN: leave them out of the loss
            kept = mx.where(mx.isfinite(mx.stop_gradient(o)), o, 0)
            term = mx.sum(kept * mx.array(c, dtype=o.dtype))
            total = term if total is None else total + term
        return total if total is not None else mx.array(0.0)
    return f


@pytest.mark.parametrize("case", list(_grad_params()))
def test_vjp_matches_finite_differences(case):
    dt, ins = _float_case_inputs(case)
    pos = _diff_positions(case, ins)
    outs = _outputs(case.mx_fn(*[_wrap(x) for x in ins]))
    rng = np.random.default_rng(1)
    cots = [rng.standard_normal(o.shape) for o in outs]
    f = _scalarized(case, ins, pos, cots)
    grads = mx.grad(f, argnums=tuple(range(len(pos))))(*[_wrap(ins[p]) for p in pos])
    grads = (grads,) if len(pos) == 1 else grads  # MLX: a 1-tuple argnums gives the bare grad
    eps = EPS if dt == "float64" else 1e-2
    tol = 1e-4 if dt == "float64" else 5e-2
    for k, p in enumerate(pos):
        x = ins[p]
        g = np.asarray(grads[k]).astype(np.float64)
        assert g.shape == x.shape
        idx = np.random.default_rng(2).permutation(x.size)[:12]
        for j in idx:
            xp, xm = x.copy().reshape(-1), x.copy().reshape(-1)
            xp[j] += eps
            xm[j] -= eps
            args_p = [_wrap(ins[q]) for q in pos]
            args_m = [_wrap(ins[q]) for q in pos]
            args_p[k] = _wrap(xp.reshape(x.shape))
            args_m[k] = _wrap(xm.reshape(x.shape))
            fd = (f(*args_p).item() - f(*args_m).item()) / (2 * eps)
            np.testing.assert_allclose(g.reshape(-1)[j], fd, rtol=tol, atol=tol,
                                       err_msg=f"{case.id} input {p} element {j}")


@pytest.mark.parametrize("case", list(_grad_params()))
def test_jvp_vjp_identity(case):
    dt, ins = _float_case_inputs(case)
    pos = _diff_positions(case, ins)
    rng = np.random.default_rng(3)
    tans = [rng.standard_normal(ins[p].shape).astype(ins[p].dtype) for p in pos]

    def f(*diff):
        args = [_wrap(x) for x in ins]
        for p, d in zip(pos, diff):
            args[p] = d
        return [o for o in _outputs(case.mx_fn(*args)) if o.dtype.kind == "f"]

    primals = [_wrap(ins[p]) for p in pos]
    outs, jv = mx.jvp(f, primals, [_wrap(t) for t in tans])
    if not outs:
        pytest.skip("no floating outputs")
    cots = [rng.standard_normal(o.shape).astype(np.asarray(o).dtype) for o in outs]
    _, vj = mx.vjp(f, primals, [_wrap(c) for c in cots])
    lhs = sum(float(np.sum(np.asarray(j, dtype=np.float64) * c)) for j, c in zip(jv, cots))
    rhs = sum(float(np.sum(t.astype(np.float64) * np.asarray(v, dtype=np.float64)))
              for t, v in zip(tans, vj))
    tol = 1e-6 if dt == "float64" else 1e-3
    assert abs(lhs - rhs) <= tol * max(1.0, abs(lhs), abs(rhs)), (lhs, rhs)


@pytest.mark.parametrize("case,dt", list(_vmap_params()))
@pytest.mark.parametrize("where", ["first", "last"])
def test_vmap_matches_loop(case, dt, where):
    batch = 3
    samples = [case.inputs(np.random.default_rng(10 + b), dt) for b in range(batch)]
    arrays = [i for i, x in enumerate(samples[0]) if isinstance(x, np.ndarray)]
    # batch every array input whose shape is the same in all samples; others stay unbatched
    batched = [i for i in arrays if all(s[i].shape == samples[0][i].shape for s in samples)]
    if not batched:
        pytest.skip("no batchable inputs")
    base = samples[0]

    def per_example(b):
        return [samples[b][i] if i in batched else base[i] for i in range(len(base))]

    def call(*xs):
        return case.mx_fn(*[_wrap(x) for x in xs])

    want = [_outputs(call(*per_example(b))) for b in range(batch)]
    stacked, in_axes = [], []
    for i, x in enumerate(base):
        if i in batched:
            s = np.stack([samples[b][i] for b in range(batch)])
            ax = 0 if where == "first" else s.ndim - 1
            stacked.append(_wrap(np.moveaxis(s, 0, ax)))
            in_axes.append(ax)
        else:
            stacked.append(_wrap(x))
            in_axes.append(None)
    arr_pos = [i for i, x in enumerate(base) if isinstance(x, np.ndarray)]

    def fn(*arrs):
        xs = list(base)
        for i, a in zip(arr_pos, arrs):
            xs[i] = a
        return case.mx_fn(*[_wrap(x) for x in xs])

    got = _outputs(mx.vmap(fn, in_axes=tuple(in_axes[i] for i in arr_pos))(
        *[stacked[i] for i in arr_pos]))
    for k, g in enumerate(got):
        ref = np.stack([np.asarray(w[k]) for w in want])
        gn = np.asarray(g)
        assert gn.shape == ref.shape, (gn.shape, ref.shape)
        if gn.dtype.kind in "fc":
            np.testing.assert_allclose(gn, ref, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            np.testing.assert_array_equal(gn, ref)
