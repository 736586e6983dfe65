"""How long `matchcast --version` and `matchcast --help` take to answer, beside Python itself.

Runs each command line as a fresh process, ``--runs`` times, in interleaved rounds (every line
once per round, so the machine's load hits them all alike), and prints the median wall time and
the median CPU time (user + system of the child, less sensitive to other processes) of each:

    python benchmarks/startup_bench.py                       # this checkout
    python benchmarks/startup_bench.py --compare /work/main  # and another checkout beside it

Lines measured: ``python -c pass`` (the floor), ``import typer`` (the CLI library),
``matchcast --version``, ``matchcast --help``, and ``matchcast replay --help`` (a command's own
help, which imports that command's modules). A checkout is run as ``python -m matchcast`` from
its directory, so ``--compare`` measures that checkout's code with this interpreter and
packages. The targets: ``--version`` within 0.3 s and ``--help`` within 0.5 s (median).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _lines(checkouts: list[Path]) -> list[tuple[str, list[str], Path]]:
    """Each line measured: its label, its argv and the directory it runs in."""
    py = sys.executable
    lines = [
        ("python -c pass", [py, "-c", "pass"], ROOT),
        ("python -c 'import typer'", [py, "-c", "import typer"], ROOT),
    ]
    for checkout in checkouts:
        name = "" if checkout == ROOT else f" [{checkout}]"
        for args in (["--version"], ["--help"], ["replay", "--help"]):
            label = f"matchcast {' '.join(args)}{name}"
            lines.append((label, [py, "-m", "matchcast", *args], checkout))
    return lines


def _once(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv``."""
    env = {**os.environ, "COLUMNS": "80", "MATCHCAST_BROKER": ""}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each line (default 10)")
    parser.add_argument(
        "--compare", type=Path, action="append", default=[], help="another checkout to measure"
    )
    args = parser.parse_args()
    lines = _lines([ROOT, *(p.resolve() for p in args.compare)])
    walls: dict[str, list[float]] = {label: [] for label, _, _ in lines}
    cpus: dict[str, list[float]] = {label: [] for label, _, _ in lines}
    for _round in range(args.runs):
        for label, argv, cwd in lines:
            wall, cpu = _once(argv, cwd)
            walls[label].append(wall)
            cpus[label].append(cpu)
    load = os.getloadavg()[0]
    print(f"{args.runs} runs each, interleaved; {os.cpu_count()} cores, load average {load:.1f}")
    print(f"{'':48} {'wall median':>12} {'cpu median':>11} {'wall max':>9}")
    for label, _, _ in lines:
        w, c = statistics.median(walls[label]), statistics.median(cpus[label])
        print(f"{label:48} {w:11.3f}s {c:10.3f}s {max(walls[label]):8.3f}s")


if __name__ == "__main__":
    main()
