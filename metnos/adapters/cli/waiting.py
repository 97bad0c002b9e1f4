"""While the model thinks: never silence, and always the bound.

On a terminal, a spinner with the seconds spent; otherwise (a pipe, a log, a
service) a line on stderr after a few seconds and then now and then. Both say
where the model is and after how long Metnos gives up (the tier's
``timeout_s``, or ``METNOS_LLM_TIMEOUT``).
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from metnos.settings import i18n

FIRST_LINE_S = 3.0
EVERY_S = 15.0


class WaitingForModel:
    def __init__(self, limits: Callable[[str], tuple[str, float]], *, out: TextIO | None = None, language: str = i18n.SOURCE) -> None:
        # limits(tier) -> (where the model is, the seconds Metnos waits for its reply)
        self.limits = limits
        # The request's language: the lines are said in it.
        self.language = language
        self.said = i18n.in_force()
        self.out = out or sys.stderr
        self.round = 0

    def wrap(self, ask: Callable[..., Any]) -> Callable[..., Any]:
        def waiting(tier: str, *a: Any, **kw: Any) -> Any:
            where, bound = self.limits(tier)
            self.round += 1
            if not self.out.isatty():
                # One line as each round starts, so a log shows every phase even when replies are quick.
                self.out.write(f"metnos: {self.said.text('ask.thinking_round', self.language, round=self.round)}\n")
                self.out.flush()
            stop = threading.Event()
            report = self._spin if self.out.isatty() else self._lines
            thread = threading.Thread(target=report, args=(stop, where, bound), daemon=True)
            thread.start()
            try:
                return ask(tier, *a, **kw)
            finally:
                stop.set()
                thread.join()

        return waiting

    def _spin(self, stop: threading.Event, where: str, bound: float) -> None:
        started = time.monotonic()
        for frame in itertools.cycle("|/-\\"):
            if stop.wait(0.1):
                self.out.write("\r\033[K")
                self.out.flush()
                return
            spinner = self.said.text("ask.thinking_spinner", self.language, spent=f"{time.monotonic() - started:.0f}", bound=f"{bound:g}")
            self.out.write(f"\r{frame} {spinner}")
            self.out.flush()

    def _lines(self, stop: threading.Event, where: str, bound: float) -> None:
        started = time.monotonic()
        wait = FIRST_LINE_S
        while not stop.wait(wait):
            spent = time.monotonic() - started
            line = self.said.text("ask.waiting_for_model", self.language, where=where, spent=f"{spent:.0f}", bound=f"{bound:g}")
            self.out.write(f"metnos: {line}\n")
            self.out.flush()
            wait = EVERY_S
