"""Ctrl-C at any moment of any command is one line and an exit code, never a traceback.

A real Ctrl-C lands wherever the process happens to be; here it is made to land at the
moments a signal handler cannot be up yet (Python importing typer, a command's modules, the
domain), by an import hook that raises KeyboardInterrupt as the module loads. The moments
after a command's loop is running are its own tests' (run() cancels on SIGINT).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

_SCRIPT = """
import sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["matchcast", *{args!r}]
from matchcast.cli import main
main()
"""


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("typer", ["demo"]),  # the command line itself, before any command
        ("matchcast.cli.replay", ["demo"]),  # the command's module
        ("simulator", ["replay", "--speed", "max"]),  # the domain the command needs
        ("matchcast.cli.watch", ["watch"]),
        ("matchcast.cli.web", ["web", "--demo"]),
    ],
)
def test_ctrl_c_while_importing_is_one_line_and_exit_130(module: str, args: list[str]) -> None:
    script = _SCRIPT.format(module=module, args=args)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "interrupted", done.stderr
