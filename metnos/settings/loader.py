"""The one loader: every setting read once, from its layers, in one order.

:func:`load` reads the environment mapping it is given (the process's own by default), finds the
workspace and its config.toml there, reads that file once, lays the command's flags over both, and
returns the :class:`Loaded` settings with where each value came from. A value that is wrong is an
error naming its key or variable, the value and what it should be: a ``METNOS_*`` variable raises
SettingsError, a config.toml key its section's error (ConfigError, LLMConfigError, ...), a flag a
ConfigError naming the flag.

The CLI loads once per command and installs the result (:func:`installed`); a part of Metnos that
was not handed its section takes the installed one from :func:`in_force`.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from metnos.settings.declare import Leaf, bools_for_numbers, fields_of, leaves, reason_of
from metnos.settings.errors import ConfigError, SettingsError
from metnos.settings.layers import env_layer, lookup, merge, put
from metnos.settings.llm_tiers import LLMSettings, resolve_tiers
from metnos.settings.log_store import STORE_PREFIXES
from metnos.settings.model import TOML_SECTIONS, Settings, section_error
from metnos.settings.runtime import set_items
from metnos.settings.telegram import DEFAULT_TOKEN_ENV
from metnos.settings.toml_file import read_toml
from metnos.settings.turn import TurnSettings
from metnos.settings.workspace import Workspace, WorkspaceConfig

DEFAULT = "default"
STORE_SOURCE = "LMDB_*, POSTGRES_*, SQLITE_* variables"
PREFIX = "METNOS_"
# Read by the test suite (METNOS_REQUIRE_*), never taken for a typo.
TEST_SUITE_PREFIX = "METNOS_REQUIRE_"
LEAVES: tuple[Leaf, ...] = tuple(leaves(Settings))
BY_KEY = {leaf.key: leaf for leaf in LEAVES}


@dataclass(frozen=True)
class Flag:
    """A command-line option given to this command: the setting it sets, its value, and how the user wrote it."""

    key: str
    value: Any
    said: str


@dataclass(frozen=True)
class Loaded:
    """The settings in force, where each came from, and the workspace and file they were read for."""

    settings: Settings
    sources: Mapping[str, str]
    workspace: Workspace
    config_file: Path
    environment: Mapping[str, str] = field(repr=False, default_factory=dict)

    def source(self, key: str) -> str:
        return self.sources.get(key, DEFAULT)

    def llm(self) -> LLMSettings:
        """The tiers in force; a model chosen by METNOS_MODEL or --model wins over a tier's own model_path."""
        return resolve_tiers(self.settings.llm, model_forced=self.source("llm.model") not in (DEFAULT, str(self.config_file)))

    @property
    def turn(self) -> TurnSettings:
        return self.settings.turn


def load(env: Mapping[str, str] | None = None, flags: Sequence[Flag] = (), *, config_file: Path | None = None) -> Loaded:
    """Every setting, read once from ``env`` (default: the process's environment), the config.toml it
    points to (or ``config_file``, when a caller names one), and ``flags``; the first wrong value is
    an error naming it."""
    env = os.environ if env is None else env
    from_env, sources = env_layer(LEAVES, env)
    store = {k: v for k, v in env.items() if k.startswith(STORE_PREFIXES)}
    if store:
        put(from_env, ("log", "store_variables"), store)
        sources["log.store_variables"] = STORE_SOURCE
    workspace = Workspace.from_config(_valid(WorkspaceConfig, from_env.get("workspace", {}), sources, ("workspace",), env, None))
    config_file = workspace.config_file if config_file is None else config_file
    data = read_toml(config_file)
    from_file = _file_layer(data, config_file)
    # A value's source is the highest layer that set it: a variable's name stays over the file's path.
    for leaf in LEAVES:
        if leaf.in_toml and leaf.key not in sources and lookup(from_file, leaf.path)[0]:
            sources[leaf.key] = str(config_file)
    from_flags: dict[str, Any] = {}
    for flag in flags:
        put(from_flags, tuple(flag.key.split(".")), flag.value)
        sources[flag.key] = flag.said  # a flag is the top layer
    merged = merge(merge(from_file, from_env), from_flags)
    settings = _valid(Settings, merged, sources, (), env, config_file)
    return Loaded(settings=settings, sources=dict(sources), workspace=workspace, config_file=config_file,
                  environment=dict(env))


def _file_layer(data: Mapping[str, Any], config_file: Path) -> dict[str, Any]:
    """config.toml's tables, each a table, each key one config.toml may hold."""
    for name in data:
        if name not in TOML_SECTIONS:
            close = difflib.get_close_matches(name, list(TOML_SECTIONS), n=1, cutoff=0.6)
            hint = f"; did you mean [{close[0]}]?" if close else ""
            raise ConfigError(f"{config_file}: [{name}]: unknown section (sections: {', '.join(TOML_SECTIONS)}){hint}")
    layer: dict[str, Any] = {}
    for name in TOML_SECTIONS:
        if name not in data:
            continue
        table = data[name]
        if not isinstance(table, Mapping):
            raise section_error(name)(f"{config_file}: [{name}] must be a table")
        for key in table:
            leaf = BY_KEY.get(f"{name}.{key}")
            if leaf is not None and not leaf.in_toml:
                known = [k for k in fields_of(_section_model((name,))) if all(l.in_toml for l in LEAVES if l.path[:2] == (name, k))]
                raise section_error(name)(f"{config_file}: [{name}] {key}: unknown key (known: {', '.join(known)}); "
                                          f"{leaf.env} sets it, in the environment")
        for path in bools_for_numbers(_section_model((name,)), table):
            key = ".".join(path)
            raise section_error(name)(f"{config_file}: [{name}] {key}: must be a number, not "
                                      f"{str(lookup(table, path)[1]).lower()} (true and false are not numbers)")
        layer[name] = dict(table)
    return layer


def _valid(model: type[BaseModel], data: Mapping[str, Any], sources: Mapping[str, str], at: tuple[str, ...],
           env: Mapping[str, str], config_file: Path | None) -> Any:
    try:
        return model(**data) if at == () else model.model_validate(dict(data))
    except ValidationError as e:
        err = e.errors()[0]
        loc = (*at, *(str(p) for p in err["loc"]))
        reason = reason_of(_section_model(loc) if len(loc) > 1 else Settings, {**err, "loc": tuple(loc[1:])})
        unknown = err["type"] in ("extra_forbidden", "unexpected_keyword_argument")
        raise _named(loc, reason, sources, env, config_file, value=None if unknown else err.get("input", None)) from None
    except SettingsError as e:
        # The turn's own bounds, raised by TurnSettings with the field's name.
        loc = ("turn", e.variable)
        source = sources.get(".".join(loc), DEFAULT)
        if source == str(config_file):
            raise ConfigError(f"{config_file}: [turn] {e.variable}: {e.reason}, not {e.value}") from None
        raise _named(loc, e.reason, sources, env, config_file) from None


def _section_model(loc: tuple[str, ...]) -> Any:
    return fields_of(Settings)[loc[0]].annotation


def _named(loc: tuple[str, ...], reason: str, sources: Mapping[str, str], env: Mapping[str, str], config_file: Path | None,
           *, value: Any = None) -> Exception:
    """The error for a wrong value at ``loc``, naming where the value came from, the value and what it should be."""
    section = loc[0]
    key = ".".join(loc[1:])
    source = DEFAULT
    for end in range(len(loc), 0, -1):
        if ".".join(loc[:end]) in sources:
            source = sources[".".join(loc[:end])]
            break
    leaf = BY_KEY.get(".".join(loc[:2])) if len(loc) > 1 else None
    if leaf is not None and source == leaf.env:
        return SettingsError(source, str(env.get(source, "")).strip(), reason)
    if value is not None and not isinstance(value, Mapping) and repr(value) not in reason:
        reason = f"{reason}, not {value!r}"
    if source.startswith("--set "):
        return ConfigError(f"{config_file} with {source}: [{section}] {key}: {reason}")
    if source.startswith("--"):
        return ConfigError(f"{source}: {reason}")
    where = f"{config_file}: " if config_file is not None else ""
    if reason.startswith((f"[{section}]", f"[{section}.")):  # the section's own words name their table
        return section_error(section)(f"{where}{reason}")
    return section_error(section)(f"{where}[{section}] {key}: {reason}" if key else f"{where}[{section}]: {reason}")


def runtime_flags(mode: str | None = None, autonomy: str | None = None, items: Sequence[str] = ()) -> list[Flag]:
    """The flags that set ``[runtime]`` for one command: --mode, --autonomy and each --set KEY=VALUE."""
    flags = [Flag("runtime.mode", mode, f"--mode {mode}")] if mode else []
    flags += [Flag("runtime.autonomy", autonomy, f"--autonomy {autonomy}")] if autonomy else []
    for item in items:
        for key, value in _flat(set_items({}, [item])):
            flags.append(Flag(f"runtime.{key}", value, f"--set {item}"))
    return flags


def _flat(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in tree.items():
        if isinstance(value, Mapping) and f"runtime.{prefix}{key}" not in BY_KEY:
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def unknown_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """METNOS_* variables that look like a misspelt setting, each with the setting it resembles."""
    env = os.environ if env is None else env
    known = {leaf.env for leaf in LEAVES if leaf.env and leaf.env.startswith(PREFIX)} | {DEFAULT_TOKEN_ENV}
    notes = []
    for name in sorted(k for k in env if k.startswith(PREFIX) and k not in known and not k.startswith(TEST_SUITE_PREFIX)):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        if close:
            notes.append(f"{name} is not a Metnos setting (did you mean {close[0]}?); it is ignored")
    return notes


_INSTALLED: list[Loaded] = []


@contextlib.contextmanager
def installed(loaded: Loaded) -> Iterator[Loaded]:
    """``loaded`` is the settings in force (for :func:`in_force`) until the block ends."""
    _INSTALLED.append(loaded)
    try:
        yield loaded
    finally:
        _INSTALLED.remove(loaded)


def in_force() -> Loaded:
    """The settings the command loaded; outside a command (a library caller, a test), loaded now."""
    return _INSTALLED[-1] if _INSTALLED else load()


def workspace_in_force() -> Workspace | None:
    """The workspace of the command running, if one is (its i18n catalogues overlay the shipped ones)."""
    return _INSTALLED[-1].workspace if _INSTALLED else None


def for_environment(env: Mapping[str, str] | None = None) -> Loaded:
    """The settings ``env`` gives: the command's own when ``env`` is the process's environment (None)."""
    return in_force() if env is None or env is os.environ else load(env)


def env_section(name: str, env: Mapping[str, str] | None = None) -> Any:
    """One of the sections only the environment sets (workspace, process, cascade, log): the command's
    own when ``env`` is the process's environment (None), else read from ``env`` alone, no file opened."""
    model = fields_of(Settings)[name].annotation
    if any(leaf.in_toml for leaf in LEAVES if leaf.path[0] == name):
        raise ValueError(f"[{name}] is a config.toml section: load the settings, not the environment alone")
    if (env is None or env is os.environ) and _INSTALLED:
        return getattr(_INSTALLED[-1].settings, name)
    env = os.environ if env is None else env
    values, sources = env_layer([leaf for leaf in LEAVES if leaf.path[0] == name], env)
    if name == "log":
        values.setdefault("log", {})["store_variables"] = {k: v for k, v in env.items() if k.startswith(STORE_PREFIXES)}
    return _valid(model, values.get(name, {}), sources, (name,), env, None)


def for_workspace(workspace: Workspace, env: Mapping[str, str] | None = None) -> Loaded:
    """The settings of ``workspace``: the command's own when they are that workspace's and no other
    environment is given; else read now, from that workspace's config.toml."""
    if (env is None or env is os.environ) and _INSTALLED and _INSTALLED[-1].config_file == workspace.config_file:
        return _INSTALLED[-1]
    return load(env, config_file=workspace.config_file)


def load_turn_settings(env: Mapping[str, str]) -> TurnSettings:
    """The turn's settings as the loader reads them from ``env`` (and the config.toml it points to)."""
    return load(env).settings.turn
