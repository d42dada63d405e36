"""Issue 16, fault 4: an array too large for the machine is a ValueError naming the op the user
called, the shape and the bytes, raised before anything is allocated (NumPy's MemoryError names
neither). Every case asks for 2^40 elements or more, which no test machine holds."""
import re

import pytest

import braze.core as mx

N = 2**20
BIG = (N, N)


def _view():
    return mx.broadcast_to(mx.array(1.0), BIG)  # a view: nothing is allocated


CALLS = {
    "eye": lambda: mx.eye(N),
    "identity": lambda: mx.identity(N),
    "tri": lambda: mx.tri(N),
    "full": lambda: mx.full(BIG, 1.0),
    "zeros": lambda: mx.zeros(BIG),
    "ones": lambda: mx.ones(BIG),
    "empty": lambda: mx.empty(BIG),
    "full_like": lambda: mx.full_like(_view(), 2.0),
    "zeros_like": lambda: mx.zeros_like(_view()),
    "ones_like": lambda: mx.ones_like(_view()),
    "tile": lambda: mx.tile(mx.ones((1024, 1024)), (1024, 1024)),
    "repeat": lambda: mx.repeat(mx.ones((1024, 1024)), N, axis=0),
    "pad": lambda: mx.pad(mx.ones((1024, 1024)), N // 2),
    "outer": lambda: mx.outer(mx.ones(N), mx.ones(N)),
    "kron": lambda: mx.kron(mx.ones((1024, 1024)), mx.ones((1024, 1024))),
    "matmul": lambda: mx.matmul(mx.ones((N, 1)), mx.ones((1, N))),
    "add": lambda: mx.broadcast_to(mx.array(1.0), BIG) + 0,
    "multiply": lambda: mx.multiply(mx.ones((N, 1)), mx.ones((1, N))),
    "where": lambda: mx.where(mx.ones((N, 1)) > 0, mx.ones((1, N)), 0.0),
    "concatenate": lambda: mx.concatenate([_view(), _view()]),
    "stack": lambda: mx.stack([_view(), _view()]),
    "triu": lambda: mx.triu(_view()),
    "tensordot": lambda: mx.tensordot(mx.ones(N), mx.ones(N), axes=0),
    "einsum": lambda: mx.einsum("i,j->ij", mx.ones(N), mx.ones(N)),
}


@pytest.mark.parametrize("op", sorted(CALLS))
def test_huge_result_names_the_op_before_allocating(op):
    with pytest.raises(ValueError, match=rf"^\[{op}\] Cannot allocate an array of shape "
                                         r"\(\d+, \d+(, \d+)*\) and dtype \w+: \d+ bytes"):
        mx.eval(CALLS[op]())


def test_lazily_huge_array_fails_when_evaluated():
    y = mx.exp(_view())  # a unary op of a view: the size is only met when it runs
    with pytest.raises(ValueError, match=re.escape(f"shape {BIG} and dtype float32: "
                                                   f"{4 * N * N} bytes")):
        mx.eval(y)


@pytest.mark.parametrize("sample", [lambda: mx.random.uniform(shape=BIG),
                                    lambda: mx.random.normal(BIG)])
def test_huge_random_samples_fail_when_evaluated(sample):
    with pytest.raises(ValueError, match=re.escape(f"shape {BIG} and dtype ")):
        mx.eval(sample())


def test_compiled_huge_result_fails_when_evaluated():
    f = mx.compile(lambda x: mx.exp(x) * 2)
    with pytest.raises(ValueError, match=re.escape(f"{4 * N * N} bytes")):
        mx.eval(f(_view()))


def test_out_of_memory_below_the_limit_names_the_op(monkeypatch):
    def exhausted(self, *inputs):
        raise MemoryError("Unable to allocate 12.0 B")  # as NumPy says when memory runs out

    y = mx.exp(mx.ones((3,)))
    monkeypatch.setattr(type(y._prim), "eval_cpu", exhausted)
    with pytest.raises(MemoryError, match=r"^\[exp\] Out of memory computing an array of "
                                          r"shape \(3,\) and dtype float32 \(Unable"):
        mx.eval(y)


def test_huge_views_are_fine():
    v = _view()
    mx.eval(v)
    assert v.shape == BIG and v[5, 7].item() == 1.0


def test_shape_beyond_64_bits_names_the_op():
    with pytest.raises(OverflowError, match=r"^\[full\]"):
        mx.full((2**64,), 0.0)
