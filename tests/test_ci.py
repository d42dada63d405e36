"""README's commands and CI agree: `.ci/run` runs README's second command verbatim, on a fresh
environment, printing the installed versions; the `test` extra brings MLX where it has wheels."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _readme_commands():
    return re.findall(r"```bash\n(.*?)\n```", _read("README.md"), flags=re.S)


def test_readme_opens_with_the_demo_and_the_test_command():
    cmds = _readme_commands()
    assert len(cmds) >= 2
    assert "python -m braze.demo" in cmds[0]
    assert "python -m pytest -q" in cmds[1]
    assert "```" not in _read("README.md").split("```bash")[0]  # no other code block first


def test_ci_runs_readme_test_command_verbatim():
    ci = [ln for ln in _read(".ci", "run").splitlines() if ln and not ln.startswith("#")]
    assert ci[0] == "set -euo pipefail"
    assert ci[-1] == _readme_commands()[1]


def test_test_command_reproduces_a_fresh_machine():
    cmd = _readme_commands()[1]
    assert cmd.startswith("python3 -m venv --clear .venv && ")  # any old environment emptied
    assert 'pip install --no-cache-dir -e ".[test]"' in cmd  # nothing reused from pip's cache
    # the versions are in the log before the tests run
    assert cmd.index("pip freeze") < cmd.index("python -m pytest")
    assert cmd.index("python -VV") < cmd.index("python -m pytest")


def test_test_extra_brings_mlx_where_it_has_wheels():
    toml = _read("pyproject.toml")
    test = re.search(r"^test = \[(.*?)\]$", toml, flags=re.S | re.M).group(1)
    assert ("\"mlx[cpu]>=0.29; sys_platform == 'linux' and (platform_machine == 'x86_64' or "
            "platform_machine == 'aarch64')\"") in test
    assert "\"mlx>=0.29; sys_platform == 'darwin' and platform_machine == 'arm64'\"" in test
