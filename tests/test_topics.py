"""The topic tree is declared once, in events, and everything else builds on it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from events import (
    DEFAULT_ROOT,
    LOAD_ROOT,
    TOPIC_TREE,
    VERIFY_ROOT,
    TopicKind,
    Topics,
    TopicSpec,
    topic_spec,
)
from matchcast.contract.channels import CHANNELS
from matchcast.transport.connection import WillSpec
from simulator import ReplayOptions

_REPO = Path(__file__).resolve().parent.parent


def _built(topics: Topics, kind: TopicKind, ids: dict[str, str]) -> str:
    """The topic of ``kind`` as :class:`Topics` builds it, ids passed by name."""
    build = getattr(topics, kind)
    return str(build(**{k: v for k, v in ids.items() if k != "root"}))


@pytest.mark.parametrize("spec", TOPIC_TREE, ids=lambda s: s.kind)
def test_each_topic_is_built_and_parsed_from_its_declaration(spec: TopicSpec) -> None:
    tree = topic_spec(spec.kind)
    assert tree is spec
    ids = {p: f"{p}-1" for p in tree.parameters if p != "root"}
    topics = Topics("some/root")
    topic = _built(topics, tree.kind, ids)
    assert topic == tree.address.format(root="some/root", **ids)
    assert topics.match(topic) == (tree.kind, ids)
    assert topics.parse(topic) == (tree.kind, next(iter(ids.values())))
    assert topic.startswith(topics.prefix(tree.kind))
    assert Topics("other").parse(topic) is None
    assert _built(Topics("{root}"), tree.kind, {p: "{" + p + "}" for p in ids}) == tree.address


def test_the_tree_has_one_entry_per_kind_and_channel() -> None:
    assert len({s.kind for s in TOPIC_TREE}) == len(TOPIC_TREE)
    assert len({s.channel_id for s in TOPIC_TREE}) == len(TOPIC_TREE)
    assert len({s.levels for s in TOPIC_TREE}) == len(TOPIC_TREE)


@pytest.mark.parametrize(
    "topic",
    [
        "matchcast/matches/m1",
        "matchcast/matches/m1/events/extra",
        "matchcast/matches/m1/goals",
        "matchcast/replayers/r1/replies",
        "matchcast/elsewhere/m1/events",
        "matchcast-load/matches/m1/events",
        "matchcast",
    ],
)
def test_topics_outside_the_tree_do_not_parse(topic: str) -> None:
    assert Topics().parse(topic) is None
    assert Topics().match(topic) is None


def test_prefix_is_the_fixed_part_before_the_first_id() -> None:
    topics = Topics()
    assert topics.prefix("status") == "matchcast/replayers/"
    assert topics.prefix("events") == "matchcast/matches/"
    assert topics.prefix("consumer_state") == "matchcast/consumers/"


def test_the_roots_keep_their_values() -> None:
    assert DEFAULT_ROOT == Topics().root == "matchcast"
    assert LOAD_ROOT == "matchcast-load"
    assert VERIFY_ROOT == "matchcast-verify"


def test_the_replayer_and_its_will_publish_as_the_tree_says() -> None:
    """The replayer has one ``--qos`` for events and state, so the tree must agree on it."""
    events, state, status = (topic_spec(k) for k in ("events", "state", "status"))
    replay = ReplayOptions()
    assert replay.qos == events.qos == state.qos
    assert replay.event_expiry == events.expiry
    assert replay.topics.root == DEFAULT_ROOT
    will = WillSpec(topic="", payload=b"")
    assert (will.qos, will.retain) == (status.qos, status.retain)
    assert [c.kind for c in CHANNELS] == ["events", "state", "status"]


# ---------------------------------------------------------------- no second copy of the tree

#: A string naming a level of the tree (``/matches/``, ``deadletter/``), or the default root
#: as a topic prefix: topics are built with :class:`events.Topics`, not spelled out.
_TREE_LITERAL = re.compile(
    r"(^|/)(" + "|".join(sorted({s.levels.split("/")[0] for s in TOPIC_TREE})) + r")/"
    r"|(^|[^-\w])" + re.escape(DEFAULT_ROOT) + r"/(?![\w/]*\.py\b)"
)
#: The packages above events: none of them may spell the tree out.
_PACKAGES = ("matchcast", "consumers", "simulator")
#: Known hits, file -> how many, left for another change to remove; a test below fails when
#: the count is wrong either way, so an allowance goes when its literal does.
_ALLOWED: dict[str, int] = {}


def _not_docstrings(tree: ast.Module) -> list[ast.Constant]:
    """The string constants of ``tree`` that are code, not documentation (docstrings and
    other bare string statements say where topics are, which is what they are for)."""
    prose = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
    ]


_ROOTS = (DEFAULT_ROOT, LOAD_ROOT, VERIFY_ROOT)


def _root_defaults(tree: ast.Module) -> list[ast.Constant]:
    """Parameters named ``root`` defaulting to a topic root spelled out, not events'."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            pairs = [
                *zip(
                    positional[len(positional) - len(args.defaults) :], args.defaults, strict=True
                ),
                *zip(args.kwonlyargs, args.kw_defaults, strict=True),
            ]
            found += [
                d
                for a, d in pairs
                if a.arg == "root" and isinstance(d, ast.Constant) and d.value in _ROOTS
            ]
    return found


def _hits() -> dict[str, list[str]]:
    hits: dict[str, list[str]] = {}
    for package in _PACKAGES:
        for path in sorted((_REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            name = path.relative_to(_REPO).as_posix()
            for node in _not_docstrings(tree):
                if _TREE_LITERAL.search(node.value):
                    hits.setdefault(name, []).append(f"{name}:{node.lineno}: {node.value!r}")
            for node in _root_defaults(tree):
                hits.setdefault(name, []).append(f"{name}:{node.lineno}: root={node.value!r}")
    return hits


def test_no_topic_tree_literal_lives_outside_events() -> None:
    """A topic is spelled out once, in events._topics; code elsewhere asks :class:`Topics`
    (``topics.events(match)``, ``topics.prefix("status")``) and takes its root defaults from
    ``events.DEFAULT_ROOT`` / ``events.LOAD_ROOT``."""
    hits = _hits()
    unexpected = [h for name, found in hits.items() if name not in _ALLOWED for h in found]
    assert unexpected == []
    counts = {name: len(hits.get(name, [])) for name in _ALLOWED}
    assert counts == _ALLOWED, "an allowance in _ALLOWED is stale: remove it"


def test_the_literal_check_finds_what_it_is_for() -> None:
    tree = ast.parse(
        '"""Docs may say matchcast/matches/{id}/events."""\n'
        'def f(root: str = "matchcast") -> str:\n'
        '    return root + "/matches/" + "x"\n'
        'HINT = "pattern write matchcast/deadletter/%u"\n'
        'PATH = "edit matchcast/asyncapi.py"\n'
    )
    found = [n.value for n in _not_docstrings(tree) if _TREE_LITERAL.search(n.value)]
    assert sorted(found) == ["/matches/", "pattern write matchcast/deadletter/%u"]
    assert [d.value for d in _root_defaults(tree)] == ["matchcast"]
