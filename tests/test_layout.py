"""The package layout the style guide promises: layering, and the public names."""

from __future__ import annotations

import ast
from pathlib import Path

import consumers
import simulator

ROOT = Path(__file__).parent.parent


def imported(package: str) -> set[str]:
    names = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names


def test_consumers_and_simulator_never_import_each_other() -> None:
    assert "simulator" not in imported("consumers")
    assert "consumers" not in imported("simulator")


def test_only_matchcast_imports_the_mqtt_client() -> None:
    for package in ("events", "consumers", "simulator"):
        assert not {"aiomqtt", "paho"} & imported(package), package


def test_consumers_exports_a_sorted_public_api() -> None:
    # sorted as ruff's RUF022 sorts: CONSTANTS, then Classes, then functions
    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert consumers.__all__ == sorted(consumers.__all__, key=kind)
    assert {
        "Subscriber",
        "on",
        "on_state",
        "on_start",
        "on_stop",
        "Runner",
        "HandlerCall",
        "ScoreDict",
        "PluginError",
        "load_plugin",
        "installed_plugins",
        "Scoreboard",
        "Ticker",
        "Recorder",
        "Stats",
    } <= set(consumers.__all__)
    assert all(hasattr(consumers, name) for name in consumers.__all__)
    assert {"Recording", "load_recording", "resolve_sources"} <= set(simulator.__all__)
