"""``--dist loadgroup`` keeps a group's tests on one worker, as the cluster tests need.

It did not: the conftest's hook that marks the groups ran after pytest-xdist had read them,
and pytest 9.2 no longer lets xdist rename a grouped test, so every worker that drew a cluster
test booted a cluster of its own (four RabbitMQ clusters in one run). ``tests/conftest.py``
now refuses a run whose groups do not hold; this runs a small suite marked the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CONFTEST = """
import pytest

@pytest.hookimpl(tryfirst=True)  # as tests/conftest.py marks the cluster tests
def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group("cluster-x"))
"""

TESTS = """
import os
import pytest

@pytest.mark.parametrize("i", range(6))
def test_one(i):
    with open(os.path.join(os.environ["MC_GROUP_OUT"], f"ran-{i}"), "w") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"])
"""


def test_a_groups_tests_all_run_on_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_grouped.py").write_text(TESTS)
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "3", "--dist", "loadgroup",
         "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:asyncio", str(suite)],
        check=False, capture_output=True, text=True, timeout=120, cwd=suite,
        env={**os.environ, "MC_GROUP_OUT": str(out)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [p.read_text() for p in out.iterdir()]
    assert len(ran) == 6, done.stdout
    workers = set(ran)
    assert len(workers) == 1, f"one group ran on {sorted(workers)}"
