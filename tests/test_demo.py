"""The README demo (`python -m braze.demo`) and examples/transformer_lm.py, in short runs."""
import importlib.util
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _demo():
    pytest.importorskip("sklearn", reason="the demo needs scikit-learn (the demo/test extra)")
    import braze.demo
    return braze.demo


def test_demo_quick_trains(capsys):
    demo = _demo()
    r = demo.main(["--quick"])  # 2 epochs and a short timing phase
    out = capsys.readouterr().out
    assert r["epochs"] == 2
    assert r["accuracy"] >= 0.85, out
    hist = r["history"]
    losses = hist["step_loss"]
    assert all(math.isfinite(v) for v in losses)
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < 0.5 * first, (first, last)
    assert hist["train_loss"][1] < hist["train_loss"][0]
    # one trace for the whole run (optimizer state created before the first call)
    assert r["traces"] == 1
    assert r["compiled_ms"] > 0 and r["uncompiled_ms"] > 0
    assert "Test accuracy" in out and "speed-up" in out
    assert "epoch  1/2 [" in out and "epoch  2/2 [" in out


def test_demo_reproducible():
    demo = _demo()
    a = demo.main(["--epochs", "1", "--no-timing", "--seed", "3"])
    b = demo.main(["--epochs", "1", "--no-timing", "--seed", "3"])
    assert a["history"]["step_loss"] == b["history"]["step_loss"]
    assert a["accuracy"] == b["accuracy"]


def test_demo_cnn_one_epoch():
    demo = _demo()
    r = demo.main(["--model", "cnn", "--epochs", "1", "--no-timing"])
    assert r["accuracy"] >= 0.6
    assert r["traces"] == 1


def test_demo_plot(tmp_path, capsys):
    demo = _demo()
    pytest.importorskip("matplotlib")
    path = tmp_path / "loss.png"
    demo.main(["--epochs", "1", "--no-timing", "--plot", str(path)])
    assert path.exists() and path.stat().st_size > 1000
    assert "Saved the loss curves" in capsys.readouterr().out


def test_demo_plot_without_matplotlib(tmp_path, monkeypatch, capsys):
    demo = _demo()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError
    path = tmp_path / "loss.png"
    demo.main(["--epochs", "1", "--no-timing", "--plot", str(path)])
    assert not path.exists()
    assert "skipped: matplotlib is not installed" in capsys.readouterr().out


def test_demo_module_entry_point():
    """`python -m braze.demo` as README runs it (a short run)."""
    pytest.importorskip("sklearn")
    p = subprocess.run([sys.executable, "-m", "braze.demo", "--epochs", "1", "--no-timing"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "Test accuracy" in p.stdout


def _lm():
    path = os.path.join(ROOT, "examples", "transformer_lm.py")
    spec = importlib.util.spec_from_file_location("transformer_lm_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_transformer_lm_smoke(capsys):
    lm = _lm()
    r = lm.main(["--steps", "5", "--corpus", "zen", "--context", "32", "--dims", "32",
                 "--heads", "2", "--layers", "1", "--log-every", "5", "--sample-length", "20"])
    out = capsys.readouterr().out
    assert len(r["losses"]) == 5 and all(math.isfinite(v) for v in r["losses"])
    assert r["traces"] == 1
    assert r["sample"].startswith("The Zen of Python")
    assert len(r["sample"]) == len("The Zen of Python, b") + 20
    assert "Sample" in out


def test_transformer_lm_stdlib_corpus():
    lm = _lm()
    text = lm.load_corpus("stdlib", 20_000)
    assert 10_000 <= len(text) <= 20_000
    assert all(c == "\n" or 32 <= ord(c) < 127 for c in text)
    tok = lm.CharTokenizer(text)
    assert tok.decode(tok.encode(text[:500])) == text[:500]


def test_step_timing_waits_for_background_builds(monkeypatch):
    """With kernels still building in the background the timing waits for them and loads
    them with one more compiled step, so it times the native kernels, not the stand-in."""
    demo = _demo()
    from braze._src.backends.cpu import background
    waited = []
    monkeypatch.setattr(background, "idle", lambda: False)
    monkeypatch.setattr(background, "wait", lambda timeout=60.0: waited.append(timeout) or True)
    calls = {"compiled": 0, "plain": 0}

    def step(name):
        def fn(x, y):
            calls[name] += 1
            return x + y
        return fn

    batch = [(demo.mx.array(1.0), demo.mx.array(2.0))] * 2
    demo.time_steps(step("compiled"), step("plain"), batch, [], rounds=1, warmup=1)
    assert waited and calls == {"compiled": 1 + 1 + 2, "plain": 1 + 2}
