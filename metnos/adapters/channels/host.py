"""A booted runtime as a channel holds it when no daemon does.

The daemon's host (metnos/adapters/daemon/host.py) and this one offer a channel the
same two things: ``ask(text, approver=..., channel=...)`` runs one turn as
``metnos ask`` does, and ``writing()`` lends the runtime to one writer at a
time. A channel is written against that pair, so it runs the same inside the
daemon and on its own (``metnos mcp serve`` over stdio, a test).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from metnos.runtime.booted import Runtime
from metnos.settings.loader import load


class RuntimeHost:
    def __init__(self, runtime: Runtime, *, env: Mapping[str, str] | None = None) -> None:
        self.runtime = runtime
        self.env = dict(os.environ if env is None else env)
        # None: the command's own settings; a mapping: the settings it gives (a test's environment).
        self._given_env = env
        self._write = threading.RLock()
        self._router: Any = None

    @contextmanager
    def writing(self) -> Iterator[Runtime]:
        with self._write:
            yield self.runtime

    def ask(self, text: str, *, approver: Callable[..., tuple[bool, str]], channel: str, actor: str = "user",
            observer: Callable[[Any], None] | None = None) -> Any:
        from metnos.runtime.turn.session import run_turn

        with self.writing() as rt:
            if self._router is None:
                from metnos.mechanisms.llm.router import LLMRouter
                from metnos.settings.loader import for_workspace

                # One router for every turn: a warm model stays warm between messages.
                self._router = LLMRouter(for_workspace(rt.workspace, self._given_env).llm(), rt.workspace, env=self.env)
            # A long-running host reads config.toml again at each turn (through the one loader), so that an
            # edit takes effect without a restart, as it always has.
            settings = load(self._given_env, config_file=rt.workspace.config_file)
            return run_turn(rt, text, approver=approver, router=self._router, env=self._given_env, actor=actor, channel=channel,
                            observer=observer, settings=settings)

    def close(self) -> None:
        if self._router is not None:
            self._router.close()
            self._router = None
