"""Issue 16, fault 5: an error names the function the user called, not the op it is built on
(`allclose` said `[isclose]`, `clip` `[maximum]`, aliases their target's name). Every public
function of `mx` and its namespaces is called with a few bad arguments; each bracketed name in
the errors must be the called one (MLX's `linalg::` prefix included)."""
import inspect
import re
import warnings

import pytest

import braze.core as mx

# functions with effects beyond their result (files, process state) are not called blindly
_EFFECTS = {"save", "savez", "savez_compressed", "save_safetensors", "save_gguf", "load",
            "export_function", "import_function", "exporter", "export_to_dot",
            "set_default_device", "set_default_stream", "set_memory_limit", "set_cache_limit",
            "set_wired_limit", "disable_compile", "enable_compile", "clear_cache", "seed",
            "synchronize", "reset_peak_memory", "new_thread_unsafe_stream"}


def _v():
    return mx.zeros((2,))


_BAD_CALLS = [
    lambda f: f("bad"),
    lambda f: f(_v(), "bad"),
    lambda f: f(_v(), mx.zeros((3,))),
    lambda f: f(mx.zeros((2, 2)), axis=5),
    lambda f: f(_v(), dtype="bad"),
    lambda f: f(_v(), _v(), "bad"),
    lambda f: f(mx.zeros(())),
    lambda f: f(mx.zeros((2, 3)), mx.zeros((4, 5))),
    lambda f: f(-1),
    lambda f: f((2, -1)),
    lambda f: f(_v(), -5),
    lambda f: f(mx.zeros((2, 2)), 5),
    lambda f: f(_v(), stream="bad"),
    lambda f: f(mx.zeros((2,), mx.complex64)),
    lambda f: f(mx.zeros((2,), mx.bool_)),
    lambda f: f(mx.zeros((2, 3)), axis=(0, 0)),
]


def _public(prefix, namespace):
    for name in sorted(dir(namespace)):
        fn = getattr(namespace, name)
        if (name.startswith("_") or name in _EFFECTS or not callable(fn)
                or inspect.isclass(fn) or inspect.ismodule(fn)):
            continue
        yield prefix + name, fn


FUNCTIONS = [*_public("", mx), *_public("linalg.", mx.linalg), *_public("fft.", mx.fft),
             *_public("random.", mx.random), *_public("fast.", mx.fast)]


# where MLX's own message names the function a call is built on, braze's keeps MLX's wording
_MLX_NAMES = {"cumulative_sum": "cumsum", "cumulative_prod": "cumprod",
              "linalg.tri_inv": "linalg::inv", **{f"fft.{n}": "fftn" for n in (
                  "fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn",
                  "ifftn", "rfftn", "irfftn")}}


def _allowed(called: str) -> set:
    name = called.rsplit(".", 1)[-1]
    ok = {name, f"linalg::{name}"} if called.startswith("linalg.") else {name}
    return ok | {_MLX_NAMES.get(called)}


@pytest.mark.parametrize("called,fn", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_errors_name_the_called_function(called, fn):
    wrong = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in _BAD_CALLS:
            try:
                call(fn)
            except Exception as e:  # noqa: BLE001 - any error is checked for its name
                m = re.match(r"\[([^\]]+)\]", str(e))
                # `[convert]`: an array passed where a Python scalar is wanted (bool(array))
                if m and m.group(1) not in _allowed(called) | {"convert"}:
                    wrong.add(f"[{m.group(1)}] {str(e)[:80]}")
    assert not wrong, sorted(wrong)
