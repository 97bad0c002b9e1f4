"""The ``ctx`` every executor receives: ``run(args, ctx) -> dict``.

ctx is a plain JSON-able dict (it crosses a process boundary into the
sandbox, where the executor cannot import Metnos). Keys:

``now``          ISO 8601 timestamp with offset, read by the runtime from its
                 recorded clock. Executors use it for "today" and must not read
                 the wall clock themselves; only ``time:read`` executors
                 (get_now) may.
``workspace``    ``{"home": str, "root": str, "read": [str], "write": [str]}``:
                 ``home`` is what a leading ``~`` in a path argument means,
                 ``root`` what ``$WORKSPACE`` means; ``read``/``write`` are the
                 executor's fs path hints resolved to absolute paths (what the
                 sandbox grants; informative, the sandbox enforces).
``outbox_dir``   where the local outbox channel of send_messages writes.
``config``       executor-facing settings, e.g.
                 ``{"telegram": {"base_url": ..., "token_env": ..., "chat_ids": {...}},
                    "messages": {"default_channel": "outbox"}}``.
                 Secrets never travel in ctx: ``token_env`` names an
                 environment variable the manifest lists under
                 ``capabilities.env``.
``executor``     ``{"name", "version"}`` of the executor being run.

Path hints understood in manifests: absolute paths, ``~`` / ``~/...`` (the
user's home), ``$WORKSPACE`` (the Metnos data dir), ``$OUTBOX`` (the outbox).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from metnos.sandbox.profile import SandboxProfile

DEFAULT_CONFIG: dict[str, Any] = {
    "telegram": {
        "base_url": "https://api.telegram.org",
        "token_env": "METNOS_TELEGRAM_TOKEN",
        "chat_ids": {},
        "timeout_s": 5,
    },
    "messages": {"default_channel": "outbox"},
}


class WorkspaceGrant(TypedDict):
    home: str
    root: str
    read: list[str]
    write: list[str]


class ExecutorCtx(TypedDict):
    now: str
    workspace: WorkspaceGrant
    outbox_dir: str
    config: dict[str, Any]
    executor: dict[str, str]


def resolve_hint(hint: str, *, home: Path, root: Path, outbox: Path) -> Path:
    """Turn a manifest path hint into an absolute path."""
    for var, base in (("$WORKSPACE", root), ("$OUTBOX", outbox)):
        if hint == var or hint.startswith(var + "/"):
            return base / hint[len(var) + 1:] if hint != var else base
    if hint == "~" or hint.startswith("~/"):
        return home / hint[2:] if hint != "~" else home
    if hint.startswith("/"):
        return Path(hint)
    raise ValueError(f"unknown path hint {hint!r}")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def build_ctx(
    *,
    now: str,
    home: Path,
    root: Path,
    outbox_dir: Path,
    profile: SandboxProfile,
    name: str,
    version: str,
    config: dict[str, Any] | None = None,
) -> ExecutorCtx:
    def grant(hints: tuple[str, ...]) -> list[str]:
        return [str(resolve_hint(h, home=home, root=root, outbox=outbox_dir)) for h in hints]

    return ExecutorCtx(
        now=now,
        workspace=WorkspaceGrant(home=str(home), root=str(root), read=grant(profile.fs_read),
                                 write=grant(profile.fs_write)),
        outbox_dir=str(outbox_dir),
        config=_merge(DEFAULT_CONFIG, config or {}),
        executor={"name": name, "version": version},
    )
