"""KernelIR (hashable, printable, exact constants, stable keys), the backend registry and the
numpy reference backend's interpreter."""
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import braze.core as mx
from braze._src import config
from braze._src.array import node
from braze._src.backends import NumpyBackend, get, registered
from braze._src.compile.compiled import Compiled
from braze._src.compile.fuse import fuse
from braze._src.compile.kernel_ir import IRInput, IROp, KernelIR
from braze._src.compile.tape import Tape
from braze._src.ops import _helpers
from braze._src.prims import REGISTRY
from braze._src.prims.binary import ADD, MULTIPLY
from braze._src.prims.unary import EXP


def _ph(shape, dt=mx.float32):
    p = node(tuple(shape), dt, None, ())
    p._tracer = True
    return p


def _ir(fn, *shapes, dt=mx.float32):
    _helpers._SCALARS.clear()  # an evaluated cached scalar operand would not be a scalar
    ins = [_ph(s, dt) for s in shapes]
    t = fuse(Tape.from_outputs(ins, [fn(*ins)]).copy())
    (node,) = [a for a in t.nodes if isinstance(a._prim, Compiled)]
    return node._prim.ir


def _const(v, dt):
    return IRInput.constant(np.asarray(v, dtype=dt.np_dtype))


def test_ir_is_hashable_and_equal_for_equal_regions():
    a = _ir(lambda x: mx.exp(x) * 2 + 1, (3,))
    b = _ir(lambda x: mx.exp(x) * 2 + 1, (3,))
    assert a == b and hash(a) == hash(b) and a.key == b.key
    c = _ir(lambda x: mx.exp(x) * 3 + 1, (3,))
    assert c != a and c.key != a.key
    assert len({a, b, c}) == 2


def test_key_ignores_shapes_but_not_dtypes():
    a = _ir(lambda x: mx.exp(x) * 2, (3,))
    b = _ir(lambda x: mx.exp(x) * 2, (5, 7))
    assert a.key == b.key, (a.kernel_text(), b.kernel_text())  # no broadcast targets
    c = _ir(lambda x: mx.exp(x) * 2, (3,), dt=mx.float16)
    assert c.key != a.key


def test_key_is_stable_across_processes():
    code = ("import braze.core as mx\n"
            "from braze._src.compile.kernel_ir import IRInput, IROp, KernelIR\n"
            "from braze._src.prims.binary import ADD\n"
            "import numpy as np\n"
            "ir = KernelIR((IRInput(mx.float32), IRInput.constant(np.float32(float('nan')))),"
            " (IROp(ADD, (0, 1), mx.float32),), (2,))\n"
            "print(ir.key)\n")
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip() for _ in range(2)}
    ir = KernelIR((IRInput(mx.float32), IRInput.constant(np.float32(float("nan")))),
                  (IROp(ADD, (0, 1), mx.float32),), (2,))
    assert keys == {ir.key}


@pytest.mark.parametrize("dt", [mx.float32, mx.float16, mx.bfloat16, mx.float64])
def test_nan_and_inf_constants(dt):
    nan, inf, ninf = (_const(v, dt) for v in (float("nan"), float("inf"), -float("inf")))
    assert nan == _const(float("nan"), dt)  # equal by bytes, unlike NaN values
    assert math.isnan(nan.py_value()) and inf.py_value() == math.inf
    assert nan.literal() == "float('nan')"
    assert inf.literal() == "float('inf')" and ninf.literal() == "float('-inf')"
    assert eval(ninf.literal()) == -math.inf


def test_constants_are_bit_exact():
    pi = _const(math.pi, mx.float64)
    assert pi.py_value() == math.pi and eval(pi.literal()) == math.pi
    v = np.float32(0.1234567891)
    c = _const(v, mx.float32)
    assert np.float32(eval(c.literal())).tobytes() == v.tobytes()
    h = _const(np.float16(0.1), mx.float16)
    assert np.float16(h.py_value()) == np.float16(0.1)
    assert _const(True, mx.bool_).literal() == "True"
    assert _const(-7, mx.int8).literal() == "-7"
    assert _const(2**63 - 1, mx.int64).py_value() == 2**63 - 1


def test_str_renders_readably():
    ir = _ir(lambda x: mx.exp(x) * 3.0 + math.pi, (3,), dt=mx.float64)
    text = str(ir)
    assert text.startswith("CompiledExpBroadcastMultiplyBroadcastAdd")
    assert "in0: float64" in text and "c1: float64 = 3.0" in text  # a baked constant
    assert "in2: float64" in text and repr(math.pi) not in text  # a run-time input
    assert "Exp(in0)" in text and "return t" in text


def test_name_and_shape_rule():
    ir = KernelIR((IRInput(mx.float32), IRInput(mx.float32)),
                  (IROp(EXP, (0,), mx.float32), IROp(MULTIPLY, (2, 1), mx.float32)), (3,))
    assert ir.name == "CompiledExpMultiply"
    assert ir.output_shape([(4, 1), (5,)]) == (4, 5)
    with pytest.raises(ValueError, match="compile"):
        ir.output_shape([(4,), (5,)])
    assert Compiled(ir).name == "CompiledExpMultiply"
    assert "Compiled" in REGISTRY


def test_numpy_backend_interprets_with_constants_from_the_ir():
    ir = KernelIR((IRInput(mx.float32), _const(2.5, mx.float32)),
                  (IROp(EXP, (0,), mx.float32), IROp(MULTIPLY, (2, 1), mx.float32)), (3, 2))
    x = np.array([[0.0], [1.0]], np.float32)
    wrong = np.array(100.0, np.float32)  # the baked value wins over the buffer
    out3, out2 = NumpyBackend().run_compiled(ir, [x, wrong], (2, 1))
    assert np.array_equal(out3, np.exp(x) * np.float32(2.5))
    assert np.array_equal(out2, np.exp(x)) and out2.base is None


def test_backend_registry():
    assert "numpy" in registered()
    assert isinstance(get("numpy"), NumpyBackend)
    with config.override(backend="numpy"):
        assert get().name == "numpy"
    with config.override(backend="cpu"):  # not built yet: the reference runs, silently
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert get().name in ("cpu", "numpy")


def test_assign_donors_follows_mlx_rules():
    ir = KernelIR((IRInput(mx.float32), IRInput(mx.float32), _const(1.0, mx.float32)),
                  (IROp(ADD, (0, 1), mx.float32), IROp(ADD, (3, 2), mx.float32)), (3, 4))
    b = NumpyBackend()
    x = np.zeros(4, np.float32)
    y = np.zeros(4, np.float32)
    c = np.zeros(4, np.float32)
    assert b.assign_donors(ir, [x, y, c], (4,), [True, True, True]) == [0, 1]
    assert b.assign_donors(ir, [x, y, c], (4,), [False, True, True]) == [1, None]
    assert b.assign_donors(ir, [x[::2], y[:2].copy(), c], (2,), [True, True, True]) == [1, None]
    assert b.assign_donors(ir, [x, y, c], (2, 4), [True, True, True]) == [None, None]
    assert b.assign_donors(ir, [x, y.astype(np.float64), c], (4,),
                           [True, True, True]) == [0, None]
