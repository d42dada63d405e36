"""Side-by-side runs of braze, an older braze revision and MLX, each variant in a fresh
process, rounds alternating the variants (a shared machine's drift falls on all of them).
Used by kv_cache.py and decode_token.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def extract(rev: str, into: str) -> None:
    """The braze package of git revision `rev`, written under `into`."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "braze"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)


def variants(old, tmp) -> list:
    """(name, library, PYTHONPATH) of each variant that can run here: braze, braze@old
    (extracted under `tmp`) when asked, and MLX when installed."""
    out = [("braze", "braze", ROOT)]
    if old:
        extract(old, tmp)
        out.append((f"braze@{old}", "braze", tmp))
    try:
        import mlx.core  # noqa: F401
        out.append(("mlx", "mlx", None))
    except ImportError:
        print("mlx is not installed: its rows are left out", file=sys.stderr)
    return out


def run_worker(script: str, args: list, pythonpath) -> list:
    """The JSON lines `script --worker ...args` prints, with `pythonpath` first on the path;
    [] (and its error on stderr) if it fails."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, script, "--worker", *args], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        print(f"{args[0]}: failed\n{out.stderr.strip()[-2000:]}", file=sys.stderr)
        return []
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def rounds(script: str, old, n: int, extra: list) -> tuple:
    """(the variants' names, every record of `n` rounds tagged with its variant's name)."""
    import tempfile

    records = []
    with tempfile.TemporaryDirectory() as tmp:
        vs = variants(old, tmp)
        for r in range(n):
            for name, lib, path in vs:
                print(f"round {r + 1}/{n}: {name}", file=sys.stderr, flush=True)
                for rec in run_worker(script, [lib, *extra], path):
                    records.append(dict(rec, variant=name))
    return [name for name, _, _ in vs], records
