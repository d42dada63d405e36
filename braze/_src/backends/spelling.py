"""What every backend's op table shares: the signal for what a backend does not generate, and
the spellings that read the same in each backend's source (Python for Numba, C++ for CUDA).

A spelling function takes the op's operands (`o`: `o.a`, `o.b` the argument expressions, `o.k`
the first argument's kind, `o.T` the result's compute type constructor, `o.floats_only(op)`),
as each backend's `spell.Operands` provides them.
"""
from __future__ import annotations


class Unsupported(Exception):
    """The region uses something this backend does not generate (complex numbers, an op
    without a spelling): it runs on another backend (the numpy reference for cpu)."""


def same(o):
    """An op that is its first argument as it is (a broadcast, a real part of a real)."""
    return o.a


def divide(o):
    o.floats_only("divide")
    return f"({o.a} / {o.b})"


def compare(sym: str):
    return lambda o: f"({o.a} {sym} {o.b})"


def bitwise(sym: str):
    def spell(o):
        if o.k == "f":
            raise Unsupported("bitwise op on floats")
        return f"({o.a} {sym} {o.b})" if o.k == "b" else f"{o.T}({o.a} {sym} {o.b})"
    return spell


#: the rows every backend's table starts from (each adds or overrides its own)
COMMON = {
    # reads of the input as it is: broadcasting is done with strides
    "identity": same, "broadcast": same, "conjugate": same, "real": same,
    "imag": lambda o: f"{o.T}(0)",
    "divide": divide,
    "bitwise_and": bitwise("&"), "bitwise_or": bitwise("|"), "bitwise_xor": bitwise("^"),
    "not_equal": compare("!="), "less": compare("<"), "less_equal": compare("<="),
    "greater": compare(">"), "greater_equal": compare(">="),
}
