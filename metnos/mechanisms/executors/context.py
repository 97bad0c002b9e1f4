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
                 executor's fs path hints expanded to absolute directories
                 (what the sandbox binds; informative, the sandbox enforces).
``outbox_dir``   where the local outbox channel of send_messages writes
                 (``$WORKSPACE/outbox``).
``config``       executor-facing settings, ``DEFAULT_CONFIG`` merged with the
                 user's, e.g. ``{"telegram": {"base_url", "token_env",
                 "chat_ids", "timeout_s"}, "messages": {"default_channel"},
                 "mail": {"accounts", "default_account", "recipients"},
                 "commands": {"shell", "allow", "max_output_bytes", "timeout_s"}}``.
                 Secrets never travel in ctx: ``token_env`` names an
                 environment variable the manifest lists under
                 ``capabilities.env``; the mail passwords arrive in
                 ``METNOS_MAIL_SECRETS``, the calendars' and address books'
                 in ``METNOS_DAV_SECRETS``, filled from the vault per call.
``executor``     ``{"name", "version"}`` of the executor being run.

Path hints in manifests use the sandbox's vocabulary: absolute paths, ``~``,
``$HOME``, ``$WORKSPACE`` (see metnos.mechanisms.sandbox.hints).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypedDict

from metnos.mechanisms.sandbox.hints import expand_hints, home_of
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.settings.commands import CommandsConfig
from metnos.settings.workspace import Workspace

DEFAULT_CONFIG: dict[str, Any] = {
    "telegram": {
        "base_url": "https://api.telegram.org",
        "token_env": "METNOS_TELEGRAM_TOKEN",
        "chat_ids": {},
        "timeout_s": 5,
    },
    "messages": {"default_channel": "outbox"},
    "calendar": {"sources": {}, "default": ""},
    "contacts": {"sources": {}, "default": ""},
    "mail": {"accounts": {}, "default_account": "", "recipients": {}},
    # run_commands' programs: the defaults of [commands] until the user's settings are merged in.
    **CommandsConfig().executor_config(),
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


def merge_config(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = merge_config(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out


def build_ctx(
    *,
    now: str,
    workspace: Workspace,
    profile: SandboxProfile,
    name: str,
    version: str,
    config: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> ExecutorCtx:
    env = os.environ if env is None else env

    def grant(hints: tuple[str, ...]) -> list[str]:
        return [str(p) for p in expand_hints(hints, workspace=workspace, env=env)]

    return ExecutorCtx(
        now=now,
        workspace=WorkspaceGrant(home=str(home_of(env)), root=str(workspace.data_dir),
                                 read=grant(profile.fs_read), write=grant(profile.fs_write)),
        outbox_dir=str(workspace.outbox_dir),
        config=merge_config(DEFAULT_CONFIG, config or {}),
        executor={"name": name, "version": version},
    )
