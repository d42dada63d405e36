"""The one-line notice a terminal gets when kernel builds hold a program up (issue 15)."""
import io

import numpy as np

import braze.core as mx
from braze._src import config
from braze._src.compile import notice


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _fresh_step():
    """A compiled function whose kernels this process has not built (a new constant)."""
    c = float(np.random.default_rng().integers(1 << 30))

    def train_step(x):
        return mx.sum(mx.exp(x * c) - x, axis=-1) + mx.sin(x * c).max()
    return mx.compile(train_step)


def _build_into(stream, after, monkeypatch, tmp_path):
    """Build a fresh compiled function's kernels with the notice going to `stream` once a
    burst has lasted `after` seconds."""
    monkeypatch.setattr(notice, "stream", stream)
    monkeypatch.setattr(notice, "AFTER", after)
    monkeypatch.setattr(notice, "_burst", None)
    with config.override(backend="cpu", cache_dir=str(tmp_path), debug=0):
        mx.eval(_fresh_step()(mx.ones((4, 8))))
    return stream.getvalue()


def test_a_long_build_prints_one_line_naming_the_function(monkeypatch, tmp_path):
    lines = _build_into(_Terminal(), 0.0, monkeypatch, tmp_path).splitlines()  # all "long"
    assert len(lines) == 1 and "compiling kernels for " in lines[0] and "train_step" in lines[0]
    assert "built in" in lines[0]


def test_no_notice_off_a_terminal_or_for_short_builds(monkeypatch, tmp_path):
    assert _build_into(io.StringIO(), 0.0, monkeypatch, tmp_path) == ""  # not a tty
    assert _build_into(_Terminal(), 3600.0, monkeypatch, tmp_path) == ""
