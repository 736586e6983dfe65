"""Finding subscriber plug-ins and building them.

A plug-in is named one of three ways:

- ``package.module:attribute`` (``attribute`` may be dotted);
- a path to a ``.py`` file, optionally with ``:attribute``;
- the name of an entry point in the group ``matchcast.subscribers``, so an installed package
  can ship one (``matchcast consume --list`` shows them).

Without an attribute, the module's one :class:`Subscriber` instance (or else its one
``Subscriber`` subclass) is used. The attribute may be a ``Subscriber``, an object with a
``.subscriber``, or a class or function that returns either. A class or function takes
options: ``KEY=VALUE`` strings converted to its parameters' annotated types, taken from the
options given, else from ``$MATCHCAST_<LABEL>_<KEY>`` (``MATCHCAST_RECORDER_PATH``).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import traceback
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import TypeAdapter, ValidationError

from consumers._errors import PluginError
from consumers._subscriber import Subscriber
from events import format_validation_error

__all__ = [
    "ENTRY_POINT_GROUP",
    "InstalledPlugin",
    "as_subscriber",
    "installed_plugins",
    "load_plugin",
    "plugin_label",
    "split_options",
]

ENTRY_POINT_GROUP = "matchcast.subscribers"
#: One name of a dotted attribute path (``Class.method``): checked name by name, with no
#: nested quantifier.
_NAME = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True, slots=True)
class InstalledPlugin:
    """An entry point of the ``matchcast.subscribers`` group, as ``--list`` shows it.

    Attributes:
        target: ``module:attribute`` it points at.
        package: the distribution that registers it, with its version.
        summary: the first line of the target's docstring.
        options: its options as ``name=default``; empty for a ready-made subscriber.
        error: why it could not be loaded, if it could not.
    """

    name: str
    target: str
    package: str
    summary: str = ""
    options: tuple[str, ...] = ()
    error: str | None = None


def _split(spec: str) -> tuple[str, str | None]:
    """``(module or path, attribute)``."""
    head, sep, attr = spec.rpartition(":")
    if sep and head and all(_NAME.fullmatch(name) for name in attr.split(".")):
        return head, attr
    return spec, None


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or "\\" in target


def _entry_point(name: str) -> EntryPoint | None:
    found = list(entry_points(group=ENTRY_POINT_GROUP, name=name))
    return found[0] if found else None


def plugin_label(spec: str) -> str:
    """The short name options and environment variables use for ``spec``.

    The entry point name, else the attribute, else the file or module name:
    ``recorder``, ``pkg.alerts:sub`` gives ``sub``, ``./alerts.py`` gives ``alerts``.
    """
    target, attr = _split(spec)
    if attr:
        return attr.rsplit(".", 1)[-1]
    if _is_path(target):
        return Path(target).stem
    return target.rsplit(".", 1)[-1]


def split_options(specs: Sequence[str], options: Sequence[str]) -> list[dict[str, str]]:
    """Assign ``[PLUGIN.]KEY=VALUE`` options to the plug-ins they name, in ``specs`` order.

    ``PLUGIN`` is a plug-in as given or its :func:`plugin_label`; it may be left out when
    there is one plug-in.

    Raises:
        PluginError: an option is malformed or names no plug-in given.
    """
    out: list[dict[str, str]] = [{} for _ in specs]
    for raw in options:
        key, eq, value = raw.partition("=")
        scope, dot, name = key.rpartition(".")
        if not eq or not name.isidentifier():
            raise PluginError(raw, "an option is PLUGIN.KEY=VALUE, e.g. recorder.path=out.jsonl")
        if not dot:
            if len(specs) != 1:
                raise PluginError(
                    raw, f"say which plug-in it is for: PLUGIN.{name}=... (one of {_labels(specs)})"
                )
            out[0][name] = value
            continue
        hits = [i for i, s in enumerate(specs) if scope in (s, plugin_label(s))]
        if not hits:
            raise PluginError(raw, f"{scope!r} is not one of the plug-ins given ({_labels(specs)})")
        for i in hits:
            out[i][name] = value
    return out


def _labels(specs: Sequence[str]) -> str:
    return ", ".join(plugin_label(s) for s in specs) or "none"


def _describe(err: BaseException) -> str:
    """``NameError: name 'x' is not defined (alerts.py, line 7)``."""
    where, what = "", str(err)
    if isinstance(err, SyntaxError) and err.filename:
        where = f" ({Path(err.filename).name}, line {err.lineno})"
        what = err.msg  # str(err) holds the location too: say it once
    elif err.__traceback__ is not None:
        frame = traceback.extract_tb(err.__traceback__)[-1]
        where = f" ({Path(frame.filename).name}, line {frame.lineno})"
    return f"{type(err).__name__}: {what}{where}"


def _load_file(path: Path, plugin: str) -> ModuleType:
    if not path.is_file():
        raise PluginError(plugin, f"no such file: {path}")
    name = path.stem if path.stem.isidentifier() else "plugin"
    if name in sys.modules:
        name = f"_matchcast_plugin_{name}_{len(sys.modules)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PluginError(plugin, f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise PluginError(plugin, f"importing it failed: {_describe(err)}") from err
    return module


def _import(name: str, plugin: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and (name == err.name or name.startswith(err.name + ".")):
            raise PluginError(
                plugin,
                f"no module named {err.name!r} (is it installed, or run from its directory?)",
            ) from err
        raise PluginError(plugin, f"importing it failed: {_describe(err)}") from err
    except Exception as err:
        raise PluginError(plugin, f"importing it failed: {_describe(err)}") from err


def _getattr(module: ModuleType, attr: str, plugin: str) -> object:
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(plugin, f"{module.__name__} has no attribute {attr!r}") from None
    return obj


def _from_module(module: ModuleType, plugin: str) -> object:
    found = vars(module)
    instances = {k: v for k, v in found.items() if isinstance(v, Subscriber)}
    if len(instances) == 1:
        return next(iter(instances.values()))
    classes = {
        k: v
        for k, v in found.items()
        if isinstance(v, type) and issubclass(v, Subscriber) and v.__module__ == module.__name__
    }
    if not instances and len(classes) == 1:
        return next(iter(classes.values()))
    several = sorted(instances or classes)
    if several:
        raise PluginError(
            plugin, f"it defines several subscribers ({', '.join(several)}): add :NAME to pick one"
        )
    raise PluginError(plugin, "it defines no Subscriber (see docs/subscribers.md)")


def _resolve(spec: str) -> object:
    target, attr = _split(spec)
    if _is_path(target):
        module = _load_file(Path(target), spec)
        return _getattr(module, attr, spec) if attr else _from_module(module, spec)
    if attr:
        return _getattr(_import(target, spec), attr, spec)
    ep = _entry_point(spec)
    if ep is not None:
        try:
            return ep.load()
        except Exception as err:
            raise PluginError(
                spec, f"loading entry point {ep.value} failed: {_describe(err)}"
            ) from err
    if importlib.util.find_spec(spec.split(".", 1)[0]) is None:
        names = ", ".join(sorted({e.name for e in entry_points(group=ENTRY_POINT_GROUP)}))
        raise PluginError(
            spec,
            f"no installed subscriber of that name (installed: {names or 'none'}); "
            "give module:attribute or a path to a .py file",
        )
    return _from_module(_import(spec, spec), spec)


def as_subscriber(obj: object, plugin: str) -> Subscriber:
    """``obj`` if it is a :class:`Subscriber`, else its ``.subscriber``.

    Raises:
        PluginError: it is neither.
    """
    if isinstance(obj, Subscriber):
        return obj
    inner = getattr(obj, "subscriber", None)
    if isinstance(inner, Subscriber):
        return inner
    raise PluginError(
        plugin, f"{type(obj).__name__} {obj!r:.60} is not a Subscriber (nor has a .subscriber)"
    )


def _is_factory(obj: object) -> bool:
    return callable(obj) and not isinstance(obj, Subscriber)


def _parameters(factory: Callable[..., object]) -> dict[str, tuple[inspect.Parameter, Any]]:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return {}
    target = factory.__init__ if isinstance(factory, type) else factory  # type: ignore[misc]
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # unresolvable annotations: take the strings as given
        hints = {}
    return {
        name: (p, hints.get(name, str))
        for name, p in sig.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def _env_name(label: str, key: str) -> str:
    return re.sub(r"\W", "_", f"MATCHCAST_{label}_{key}").upper()


def _build(
    factory: Callable[..., object],
    plugin: str,
    label: str,
    options: Mapping[str, str],
    environ: Mapping[str, str],
    defaults: Mapping[str, object],
) -> object:
    params = _parameters(factory)
    unknown = sorted(set(options) - set(params))
    if unknown:
        accepted = ", ".join(params) or "none"
        raise PluginError(plugin, f"no option {', '.join(unknown)} (its options: {accepted})")
    kwargs: dict[str, object] = {}
    for name, (param, hint) in params.items():
        env = _env_name(label, name)
        raw = options.get(name, environ.get(env))
        if raw is None:
            if name in defaults:
                kwargs[name] = defaults[name]
                continue
            if param.default is param.empty:
                raise PluginError(
                    plugin, f"needs option {name} (--opt {label}.{name}=VALUE or ${env})"
                )
            continue
        try:
            kwargs[name] = TypeAdapter(hint).validate_python(raw)
        except ValidationError as err:
            raise PluginError(
                plugin, f"option {name}={raw!r}: {format_validation_error(err)}"
            ) from None
        except Exception:  # an annotation pydantic cannot build: pass the string
            kwargs[name] = raw
    try:
        return factory(**kwargs)
    except Exception as err:
        raise PluginError(plugin, f"building it failed: {_describe(err)}") from err


def load_plugin(
    spec: str,
    options: Mapping[str, str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    defaults: Mapping[str, object] | None = None,
) -> Subscriber:
    """The subscriber ``spec`` names (see the module docstring), built with ``options``.

    Args:
        spec: ``module:attribute``, a path to a ``.py`` file, or an entry point name.
        options: ``{key: value}`` strings for a plug-in that is a class or function.
        environ: where ``MATCHCAST_<LABEL>_<KEY>`` options are looked up; none by default.
        defaults: values for the parameters a class or function has that no option or
            environment variable sets: ``consume`` gives its ``max_matches``, so a plug-in
            that keeps something per match (the scoreboard) is bounded like the runner.

    Raises:
        PluginError: it cannot be found, imported or built, or is not a subscriber; the
            message says why and what to type instead.
    """
    options = options or {}
    obj = _resolve(spec)
    if _is_factory(obj):
        factory = typing.cast(Callable[..., object], obj)
        obj = _build(factory, spec, plugin_label(spec), options, environ or {}, defaults or {})
    elif options:
        raise PluginError(
            spec,
            f"takes no options ({', '.join(options)}): it is a ready-made subscriber; "
            "point at a class or function that builds one",
        )
    return as_subscriber(obj, spec)


def installed_plugins() -> list[InstalledPlugin]:
    """Every entry point of the ``matchcast.subscribers`` group, sorted by name."""
    out = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = ep.dist
        package = f"{dist.name} {dist.version}" if dist is not None else "?"
        try:
            obj = ep.load()
        except Exception as err:  # listed with the reason instead
            out.append(InstalledPlugin(ep.name, ep.value, package, error=_describe(err)))
            continue
        if type(obj) is Subscriber:  # the function form: the module says what it does
            module = sys.modules.get(ep.module)
            doc = (inspect.getdoc(module) if module else None) or ""
        else:
            doc = inspect.getdoc(obj) or ""
        options: tuple[str, ...] = ()
        if _is_factory(obj):
            factory = typing.cast(Callable[..., object], obj)
            options = tuple(
                f"{n}={_show(p.default)}" if p.default is not p.empty else f"{n} (required)"
                for n, (p, _) in _parameters(factory).items()
                if not callable(p.default)  # e.g. echo=print: not settable from a string
            )
        summary = _plain(doc.strip().splitlines()[0]) if doc.strip() else ""
        out.append(InstalledPlugin(ep.name, ep.value, package, summary, options))
    return out


def _show(value: object) -> str:
    return str(value) if isinstance(value, Path) else repr(value)


def _plain(text: str) -> str:
    """A docstring line without its reST roles and literal quotes."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")
