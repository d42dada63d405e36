"""Smoke tests of benchmarks/compile_bench.py (the smallest size, --quick, no peer needed) and
benchmarks/compile_latency.py (tiny workloads)."""
import importlib.util
import json
import os
import sys

import pytest

_BENCH = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks")


def _load(name):
    path = os.path.join(_BENCH, f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load("compile_bench")


def _records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_quick_run_compiled(bench, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    rc = bench.main(["--quick", "--sizes", "1", "--variants", "braze.c,braze,numpy",
                     "--workloads", "gelu,chain,softmax,adam", "--json", str(out),
                     "--no-progress"])
    assert rc == 0
    recs = _records(out)
    meta = [r for r in recs if r["kind"] == "meta"]
    assert len(meta) == 1 and meta[0]["backend"] and meta[0]["copy_bandwidth_Bps"] > 0
    times = [r for r in recs if r["kind"] == "time"]
    assert len(times) == 4 * 3
    for r in times:
        assert r["status"] == "ok", r
        assert r["ok"], r
        assert r["median_s"] > 0 and r["elements"] == 1
    summ = [r for r in recs if r["kind"] == "summary"]
    assert len(summ) == 4 and all("ratio" in s and "roofline" in s for s in summ)
    text = capsys.readouterr().out
    assert "braze backend:" in text and "bz.c/best" in text and "per call at 1 element" in text


def test_every_workload_uncompiled(bench, tmp_path):
    out = tmp_path / "out.jsonl"
    assert bench.main(["--quick", "--sizes", "1", "--variants", "braze,numpy",
                       "--json", str(out), "--no-progress"]) == 0
    times = [r for r in _records(out) if r["kind"] == "time"]
    assert len(times) == 8 * 2
    assert all(r["status"] == "ok" and r["ok"] for r in times), times


def test_missing_peer_drops_its_columns(bench, monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` now raises ImportError
    loaded, missing = bench.load_variants(["numpy", "jax.jit"])
    assert list(loaded) == ["numpy"] and "jax.jit" in missing


def test_sizes_and_traffic(bench):
    peers = bench.P
    assert [bench.parse_size(s) for s in ("1", "4Ki", "1Mi", "16Mi", "12")] == \
        [1, 4096, 1 << 20, 1 << 24, 12]
    assert bench.size_name(1 << 24) == "16Mi" and bench.size_name(3) == "3"
    assert peers.shape_of("softmax", 1 << 20) == (256, 4096)
    assert peers.shape_of("softmax", 1) == (1, 1)
    assert peers.bytes_moved("adam", 1024) == 7 * 4 * 1024
    assert peers.bytes_moved("layernorm", 4096) == 4 * (2 * 4096 + 2 * 4096)


def test_unknown_workload_is_an_error(bench):
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--workloads", "nope"])


def test_stateful_runner_drops_the_old_state_before_waiting(bench):
    """Adam is timed as `p, m, v = step(p, m, v, g); eval(p, m, v)`: when the new state is
    waited for, nothing but the pending computation holds the old one (so it can be donated)."""
    import weakref

    class State:
        pass

    refs = []

    class Variant:
        def sync(self, out):
            assert all(r() is None for r in refs[:-3])  # every state but the newest is gone

    def step(p, m, v, g):
        out = (State(), State(), State())
        refs.extend(weakref.ref(o) for o in out)
        return out

    init = (State(), State(), State(), State())
    refs.extend(weakref.ref(o) for o in init[:3])
    runner = bench.Runner(Variant(), step, init, True)
    del init
    assert runner.timed(3) >= 0
    assert len(refs) == 12 and all(r() is not None for r in refs[-3:])


def test_compile_latency_tiny(tmp_path, capsys):
    lat = _load("compile_latency")
    out = tmp_path / "lat.jsonl"
    assert lat.main(["--sizes", "40", "--layers", "3", "--blocks", "1", "--repeat", "1",
                     "--no-build", "--json", str(out)]) == 0
    recs = _records(out)
    assert [r["workload"] for r in recs] == ["chain", "mlp", "transformer"]
    for r in recs:
        assert r["ops"] > 0 and r["kernels"] > 0 and r["passes"] >= r["fuse"] >= 0
    assert "pass/k" in capsys.readouterr().out


# -- benchmarks/programs.py -------------------------------------------------------------------
def test_programs_quick_braze_mlp(tmp_path, capsys):
    """One tiny program on braze only, warm, in a child process (as the script runs it)."""
    prog = _load("programs")
    out = tmp_path / "programs.jsonl"
    rc = prog.main(["--quick", "--programs", "mlp", "--libs", "braze", "--conditions", "warm",
                    "--min-time", "0.1", "--json", str(out)])
    assert rc == 0
    recs = _records(out)
    meta = [r for r in recs if r["kind"] == "meta"]
    assert len(meta) == 1 and len(meta[0]["load_start"]) == 3 and len(meta[0]["load_end"]) == 3
    (res,) = [r for r in recs if r["kind"] == "result"]
    assert res["status"] == "ok", res
    assert (res["lib"], res["program"], res["condition"]) == ("braze", "mlp", "warm")
    assert res["phases"]["step"]["rate"] > 0 and res["samples"] >= 2
    text = capsys.readouterr().out
    assert "program (warm)" in text and "load average at start" in text and "mlp" in text


def test_programs_table_targets_and_plot(tmp_path, capsys):
    """The table, the targets and the plot from made-up records (no child process)."""
    prog = _load("programs")
    res = prog.Results()

    def rec(lib, cond, rate, program="mlp", size=""):
        phases = ({"prefill": {"rate": rate}, "decode": {"rate": rate / 10}}
                  if program == "llm" else {"step": {"rate": rate}})
        res.add({"program": program, "size": size, "lib": lib, "condition": cond,
                 "status": "ok", "phases": phases})

    rec("braze", "warm", 30.0), rec("mlx", "warm", 10.0), rec("braze", "busy", 20.0)
    rec("braze", "cold", 1.0), rec("mlx", "cold", 2.0)
    rec("braze", "warm", 100.0, "llm", "tiny"), rec("mlx", "warm", 100.0, "llm", "tiny")
    res.add({"program": "cnn", "size": "", "lib": "braze", "condition": "warm",
             "status": "error", "error": "boom"})
    rows = prog.rows_of(["mlp", "llm", "cnn"], ["tiny"])
    assert rows == [("mlp", None), ("llm", "tiny"), ("cnn", None)]
    prog.print_tables(res, rows, ["braze", "mlx"], ["warm", "cold", "busy"])
    text = capsys.readouterr().out
    assert "3.00×" in text and "0.50×" in text and "llm-tiny decode" in text
    assert "error" in text  # the failing cell
    lines, misses = prog.targets(res, rows, ["warm", "cold", "busy"])
    assert any("mlp" in m and "cold 0.50" in m for m in misses)
    assert any("mlp" in m and "busy 1.50" in m for m in misses)
    assert any("llm-tiny prefill" in m and "warm 1.00" in m for m in misses)
    assert not any("mlp: warm" in m for m in misses)
    pytest.importorskip("matplotlib")
    png = tmp_path / "r.png"
    assert prog.plot(res, rows, ["warm", "cold"], str(png)) and png.stat().st_size > 1000


def test_programs_unknown_program_is_an_error():
    with pytest.raises(SystemExit):
        _load("programs").main(["--programs", "nope"])


# -- benchmarks/small_steps.py ----------------------------------------------------------------
@pytest.mark.parametrize("program", ["gcn", "convbn"])
def test_small_steps_worker_runs_each_program(program):
    """A few compiled steps of each small program on braze, in this process."""
    rec = _load("small_steps").worker("braze", program, 2)
    assert (rec["program"], rec["lib"]) == (program, "braze") and rec["step_s"] > 0
