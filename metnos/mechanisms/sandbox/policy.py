"""The policy check that runs before any spawn (seeds/000 ch. 5.3 step 1).

Every path argument is resolved with realpath and must lie under a declared
grant (``is_relative_to``, so ``proj-evil`` is not inside ``proj``); every
host argument must be a declared host. A failure is a PolicyViolation naming
the argument and the rule, raised before any process exists. The kernel
layers are the safety net for a bug here, not the first line.

Which arguments are paths or hosts is read from the input schema: a string
with ``"format": "path"`` is a path (``"x-access": "write"`` when it is
written to), one with ``"format"`` ``uri``/``url``/``hostname`` is a host,
one with ``"x-program": true`` names a program to start, which must be one
the profile lists (``code:exec``; ``$COMMANDS_ALLOW`` is config.toml's
``[commands]``).
Where the schema says nothing, conventional key names (``path``,
``*_dir``, ``url`` ...) are treated the same way, so an unannotated schema
fails closed rather than open.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from domain.errors import MetnosError
from metnos.mechanisms.failures import InvocationError, NetworkDenied, PolicyViolation
from metnos.mechanisms.sandbox import netallow
from metnos.mechanisms.sandbox.forbidden import covers_system_root, is_inside, user_forbidden
from metnos.mechanisms.sandbox.hints import HintError, expand_hint, home_of, resolve
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.settings.commands import ALLOW_SETTING, COMMANDS_ALLOW, SHELL_SETTING
from metnos.settings.loader import for_workspace
from metnos.settings.workspace import Workspace

_PATH_KEYS = frozenset({"path", "paths", "file", "files", "dir", "dirs", "directory", "folder",
                        "src", "source", "dst", "dest", "destination", "target", "root", "cwd"})
_PATH_SUFFIXES = ("_path", "_paths", "_dir", "_dirs", "_file", "_files", "_folder")
_WRITE_KEYS = frozenset({"dst", "dest", "destination", "target", "out", "output"})
_HOST_KEYS = frozenset({"url", "urls", "host", "hosts", "endpoint", "uri"})
_HOST_FORMATS = frozenset({"uri", "url", "iri", "hostname", "uri-reference"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOSTNAME = re.compile(r"^[a-z0-9._-]+$|^\[[0-9a-f:.]+\]$")


@dataclass(frozen=True)
class Grant:
    lexical: Path  # as the hint expands
    real: Path  # symlinks resolved: what gets bound and compared
    write: bool


@dataclass(frozen=True)
class Scope:
    """A profile's filesystem and network scope, resolved for one spawn."""

    grants: tuple[Grant, ...]
    forbidden: tuple[Path, ...]
    hosts: tuple[str, ...]
    home: Path
    # The instance's [network] allow: a host must be on it and on ``hosts``.
    allow: tuple[str, ...] = ()
    # The programs a call may start (``code:exec``, ``$COMMANDS_ALLOW`` read from [commands]), and
    # the position of the shell axis they come with: "forbidden", "listed" or "free".
    programs: tuple[str, ...] = ()
    shell: str = "forbidden"
    from_commands: bool = False

    @property
    def exec_fence(self) -> tuple[str, ...] | None:
        """The only programs the kernel lets the sandbox execute once it runs (Landlock), or None for
        no such fence: a profile whose programs come from [commands], unless that says "free"."""
        if self.shell == "free" or not self.from_commands:
            return None
        return self.programs if self.shell == "listed" else ()

    def roots(self, *, write: bool) -> list[Grant]:
        return [g for g in self.grants if g.write or not write]


NOT_ALLOWED = "not in [network] allow of config.toml (the instance's allow-list); add it there to let executors reach it"


def scope_for(profile: SandboxProfile, *, workspace: Workspace, env: Mapping[str, str] | None = None,
              allow: tuple[str, ...] | None = None) -> Scope:
    """Resolve the profile's hints; a hint no profile may hold is a violation.
    ``allow`` is the instance's network allow-list (default: read from the
    workspace's config.toml when the profile wants the network)."""
    env = os.environ if env is None else env
    forbidden = user_forbidden(workspace, env)
    grants: dict[tuple[Path, bool], Grant] = {}
    for hints, write in ((profile.fs_read, False), (profile.fs_write, True)):
        for hint in hints:
            try:
                lexical = expand_hint(hint, workspace=workspace, env=env)
            except HintError as e:
                raise PolicyViolation("profile", "bad-hint", e.reason, hint) from None
            real = resolve(lexical)
            for p in (lexical, real):
                root = covers_system_root(p)
                if root is not None:
                    raise PolicyViolation("profile", "system-path", f"a grant may not cover {root}", hint)
                bad = is_inside(p, forbidden)
                if bad is not None:
                    raise PolicyViolation("profile", "forbidden-path", f"{bad} is a core forbidden path", hint)
            grants[(real, write)] = Grant(lexical=lexical, real=real, write=write)
    from_commands = COMMANDS_ALLOW in profile.binaries
    shell, programs = _programs(profile, workspace) if from_commands else ("listed", profile.binaries)
    return Scope(
        grants=tuple(grants.values()),
        forbidden=tuple(forbidden),
        hosts=tuple(h.strip() if h.strip() == netallow.NETWORK_ALLOW else h.strip().lower() for h in profile.network_hosts),
        home=home_of(env),
        allow=_allow_list(workspace) if allow is None and profile.wants_network else (allow or ()),
        programs=programs, shell=shell, from_commands=from_commands,
    )


def _programs(profile: SandboxProfile, workspace: Workspace) -> tuple[str, tuple[str, ...]]:
    """[commands] shell and the programs listed: the instance's allow in place of ``$COMMANDS_ALLOW``."""
    try:
        commands = for_workspace(workspace).settings.commands
    except MetnosError as e:
        raise PolicyViolation("config", "bad-commands", str(e)) from None
    named = [b for b in profile.binaries if b != COMMANDS_ALLOW]
    return commands.shell, tuple(dict.fromkeys([*named, *commands.allow]))


def _allow_list(workspace: Workspace) -> tuple[str, ...]:
    try:
        return for_workspace(workspace).settings.network.allow
    except MetnosError as e:
        # Fail closed, and say where.
        raise PolicyViolation("config", "bad-network-allow", str(e)) from None


def check_path(value: str, *, argument: str, scope: Scope, write: bool, entry: bool = False) -> Path:
    """The resolved path, or PolicyViolation.

    With ``entry``, the path names a directory entry the executor acts on
    itself (deletes or moves it): a symlink there is the thing acted on, so
    only the folders above it are resolved, and the link is never followed
    to its target.
    """
    if "\x00" in value:
        raise PolicyViolation(argument, "nul-byte", "a path may not contain NUL", value)
    text = value
    if text == "~" or text.startswith("~/"):
        text = str(scope.home) + text[1:]
    p = Path(text)
    if not p.is_absolute():
        raise PolicyViolation(argument, "relative-path", "paths must be absolute (or start with ~/)", value)
    if ".." in p.parts:
        raise PolicyViolation(argument, "dotdot", "'..' is not allowed in a path", value)
    lexical = Path(os.path.normpath(p))
    real = resolve(lexical.parent) / lexical.name if entry and lexical.name else resolve(lexical)
    for candidate in (lexical, real):
        bad = is_inside(candidate, list(scope.forbidden))
        if bad is not None:
            raise PolicyViolation(argument, "forbidden-path", f"{bad} is a core forbidden path", value)
    roots = scope.roots(write=write)
    if is_inside(real, [g.real for g in roots]) is not None:
        return real
    if is_inside(lexical, [g.lexical for g in roots] + [g.real for g in roots]) is not None:
        raise PolicyViolation(argument, "symlink-escape", f"resolves to {real}, outside the grant", value)
    need = "fs:write" if write else "fs:read"
    if write and is_inside(real, [g.real for g in scope.grants]) is not None:
        raise PolicyViolation(argument, "read-only-grant", "the path is granted for reading only", value)
    raise PolicyViolation(argument, "outside-grant", f"no {need} grant covers {real}", value)


def _ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def check_host(value: str, *, argument: str, scope: Scope) -> str:
    if any(c in value for c in "\x00\\ \t\r\n"):
        raise PolicyViolation(argument, "malformed-url", "control characters, spaces or backslashes", value)
    if not scope.hosts:
        raise PolicyViolation(argument, "no-network", "the profile declares no network host", value)
    if "://" in value:
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError as e:
            raise PolicyViolation(argument, "malformed-url", str(e), value) from None
        if parts.scheme.lower() not in _DEFAULT_PORTS:
            raise PolicyViolation(argument, "scheme", f"scheme {parts.scheme!r} is not http(s)", value)
        host = (parts.hostname or "").rstrip(".")
        port = port or _DEFAULT_PORTS[parts.scheme.lower()]
    else:
        host, _, port_text = value.lower().partition(":")
        host = host.rstrip(".")
        port = int(port_text) if port_text.isdigit() else None
    if not host or not (_HOSTNAME.match(host) or _ipv6(host)):
        raise PolicyViolation(argument, "malformed-url", "no usable host name", value)
    if not netallow.declared(host, port, scope.hosts):
        raise PolicyViolation(argument, "undeclared-host", f"{host} is not a declared network host", value)
    if not netallow.allowed(host, port, scope.allow):
        raise NetworkDenied(argument, host, port, NOT_ALLOWED)
    return host


def check_program(value: str, *, argument: str, scope: Scope) -> str:
    """The program a call asks to start, or PolicyViolation naming the setting that would allow it."""
    if "\x00" in value or not value.strip():
        raise PolicyViolation(argument, "bad-program", "a program name may not be empty or hold NUL", value)
    if scope.shell == "free":
        return value
    if scope.shell == "forbidden":
        raise PolicyViolation(argument, "shell-forbidden",
                              f"{SHELL_SETTING} is \"forbidden\" in config.toml: no program may run; set it to "
                              f"\"listed\" and name the programs in {ALLOW_SETTING}", value)
    if any(c.isspace() for c in value):
        raise PolicyViolation(argument, "program-with-arguments",
                              "give the program's bare name (like \"du\") and its arguments as a list in args "
                              "(like [\"-sh\", \"~/Music\"]): no shell splits them", value)
    if "/" in value:
        raise PolicyViolation(argument, "program-path",
                              f"name the program, not a path: {ALLOW_SETTING} lists bare names found in /usr/bin or /bin",
                              value)
    if value not in scope.programs:
        listed = ", ".join(scope.programs) or "none"
        raise PolicyViolation(argument, "unlisted-program",
                              f"{value} is not in {ALLOW_SETTING} of config.toml (listed: {listed}); add it there "
                              "to let run_commands start it", value)
    return value


# -- walking the arguments alongside the schema ---------------------------------

def _deref(schema: Any, root: Any) -> Any:
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/"):
        node = root
        for part in schema["$ref"][2:].split("/"):
            node = node.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(node, dict) else {}
        schema = node
        seen += 1
        if seen > 32:
            break
    return schema if isinstance(schema, dict) else {}


def _classify(key: str | None, schema: dict) -> tuple[str | None, bool]:
    fmt = schema.get("format")
    write = schema.get("x-access") == "write"
    if schema.get("x-program") is True:
        return "program", False
    if fmt == "path":
        return "path", write
    if fmt in _HOST_FORMATS or schema.get("x-host") is True:
        return "host", False
    if key is not None:
        k = key.lower()
        if k in _PATH_KEYS or k.endswith(_PATH_SUFFIXES):
            return "path", write or k in _WRITE_KEYS or k.startswith(("dst_", "dest_", "out_", "output_"))
        if k in _HOST_KEYS or k.endswith(("_url", "_urls", "_host")):
            return "host", False
    return None, False


def is_path_argument(key: str | None, schema: dict) -> bool:
    """Whether the check below takes an argument of this name and schema for a path."""
    return _classify(key, schema)[0] == "path"


def _walk(value: Any, schema: dict, root: Any, key: str | None, pointer: str, out: list) -> None:
    schema = _deref(schema, root)
    # Data the executor computes on (entries of a list operator) is marked
    # opaque in its signed schema: strings in it name nothing to open.
    if schema.get("x-opaque") is True:
        return
    if isinstance(value, str):
        kind, write = _classify(key, schema)
        if kind:
            out.append((pointer or "/", kind, write, value, schema.get("x-entry") is True))
    elif isinstance(value, list):
        items = schema.get("items", {})
        # An array's elements take their meaning from the array's key.
        for i, v in enumerate(value):
            _walk(v, items if isinstance(items, dict) else {}, root, key, f"{pointer}/{i}", out)
    elif isinstance(value, dict):
        props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
        for k, v in value.items():
            esc = str(k).replace("~", "~0").replace("/", "~1")  # JSON pointer escaping
            _walk(v, props.get(k, {}), root, str(k), f"{pointer}/{esc}", out)


def path_arguments(args: Mapping[str, Any], input_schema: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(JSON pointer, value) of every path argument, as the check below finds them."""
    return place_arguments(args, input_schema, kinds=("path",))


def place_arguments(args: Mapping[str, Any], input_schema: Mapping[str, Any] | None,
                    kinds: tuple[str, ...] = ("path", "host")) -> list[tuple[str, str]]:
    """(JSON pointer, value) of every argument that names a place the call reaches (a path or a host), as the check below finds them."""
    found: list = []
    schema = dict(input_schema or {})
    _walk(dict(args), schema, schema, None, "", found)
    return [(pointer, value) for pointer, kind, _write, value, _entry in found if kind in kinds]


def check_args(
    args: Mapping[str, Any],
    input_schema: Mapping[str, Any] | None,
    scope: Scope,
) -> dict[str, Path | str]:
    """Check every path and host argument; returns pointer -> resolved value."""
    found: list = []
    schema = dict(input_schema or {})
    _walk(dict(args), schema, schema, None, "", found)
    checked: dict[str, Path | str] = {}
    for pointer, kind, write, value, entry in found:
        if kind == "path":
            checked[pointer] = check_path(value, argument=pointer, scope=scope, write=write, entry=entry)
        elif kind == "program":
            checked[pointer] = check_program(value, argument=pointer, scope=scope)
        else:
            checked[pointer] = check_host(value, argument=pointer, scope=scope)
    return checked


def write_paths(
    args: Mapping[str, Any],
    input_schema: Mapping[str, Any] | None,
    scope: Scope,
) -> dict[str, Path]:
    """The checked paths the executor may write (pointer -> resolved path): what undo keeps a before-image of."""
    found: list = []
    schema = dict(input_schema or {})
    _walk(dict(args), schema, schema, None, "", found)
    return {
        pointer: check_path(value, argument=pointer, scope=scope, write=True, entry=entry)
        for pointer, kind, write, value, entry in found if kind == "path" and write
    }


def writes_narrowed_to_arguments(
    profile: SandboxProfile,
    args: Mapping[str, Any],
    input_schema: Mapping[str, Any] | None,
    *,
    workspace: Workspace,
    env: Mapping[str, str] | None = None,
) -> SandboxProfile:
    """The profile of one call whose manifest says ``fs:write:arguments``: its fs:write grants become
    read grants, and only the paths the call's written arguments name are writable (none: nothing is).
    Where the arguments fail the check, the profile is left as it is: the check before the spawn then
    refuses the call with the cause, not with a narrowed grant's."""
    try:
        found = write_paths(args, input_schema, scope_for(profile, workspace=workspace, env=env))
    except (InvocationError, MetnosError):
        return profile
    reads = tuple(dict.fromkeys((*profile.fs_read, *profile.fs_write)))
    return profile.model_copy(update={"fs_read": reads, "fs_write": tuple(sorted({str(p) for p in found.values()}))})
