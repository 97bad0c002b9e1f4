"""From manifest path hints to the directories the sandbox binds.

Hints are glob-like (``~/notes/**``, ``$WORKSPACE/inbox/*.md``); bwrap and
Landlock work on directories, so a hint is cut at its first glob segment
(seeds/003 ch. 3.5). Finer gating is the policy check's job.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from metnos.settings.workspace import Workspace

_GLOB_CHARS = frozenset("*?[")


class HintError(ValueError):
    def __init__(self, hint: str, reason: str):
        super().__init__(f"path hint {hint!r}: {reason}")
        self.hint = hint
        self.reason = reason


def home_of(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def expand_hint(hint: str, *, workspace: Workspace, env: Mapping[str, str]) -> Path:
    """The absolute, normalised (not yet symlink-resolved) root of a hint."""
    if "\x00" in hint:
        raise HintError(hint, "contains a NUL byte")
    text = hint.strip()
    if text == "~" or text.startswith("~/"):
        text = str(home_of(env)) + text[1:]
    elif text.startswith("$HOME") and text[5:6] in ("", "/"):
        text = str(home_of(env)) + text[5:]
    elif text.startswith("$WORKSPACE") and text[10:11] in ("", "/"):
        text = str(workspace.data_dir) + text[10:]
    elif text.startswith("$") or text.startswith("~"):
        raise HintError(hint, "only ~, $HOME and $WORKSPACE may start a hint")
    parts = Path(text).parts
    if not parts or parts[0] != "/":
        raise HintError(hint, "must be absolute once expanded")
    if ".." in parts:
        raise HintError(hint, "must not contain '..'")
    kept: list[str] = []
    for part in parts:
        if _GLOB_CHARS & set(part):
            break
        kept.append(part)
    return Path(os.path.normpath(os.path.join(*kept)))


def expand_hints(hints: Iterable[str], *, workspace: Workspace, env: Mapping[str, str]) -> list[Path]:
    seen: dict[Path, None] = {}
    for h in hints:
        seen.setdefault(expand_hint(h, workspace=workspace, env=env), None)
    return list(seen)


def resolve(path: Path) -> Path:
    """realpath, tolerating paths that do not exist yet."""
    return Path(os.path.realpath(path))
