"""Synt: generate an executor with the user at both gates; the proposals and suggestions it keeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metnos.runtime.synt.fusion import defuse as defuse_fusion
from metnos.runtime.synt.pipeline import Synt
from metnos.services import wiring
from metnos.settings.llm_tiers import LLMSettings
from metnos.settings.loader import in_force
from projections.proposals import find

__all__ = ["SyntSession", "activate", "defuse", "find", "proposals_state", "synt_tier"]


class _LazyModel:
    """The tier's provider, started only when a stage asks the model."""

    def __init__(self, router: Any, tier: str) -> None:
        self._router = router
        self.tier = tier
        self._provider: Any = None

    def _get(self) -> Any:
        if self._provider is None:
            self._provider = self._router.for_tier(self.tier)
        return self._provider

    @property
    def model(self) -> str:
        return self._get().model

    def complete(self, messages: Any, **kw: Any) -> Any:
        return self._get().complete(messages, **kw)


def synt_tier(settings: LLMSettings) -> str:
    """The wise tier; the frontier only when config.toml configures one by name."""
    return "frontier" if settings.tier("frontier").source == "config" else "wise"


class SyntSession:
    """A booted runtime, an LLM router, and synt over both; ``progress`` hears the model starting."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.progress = progress

    def __enter__(self) -> Synt:
        workspace = in_force().workspace
        env = wiring.turn_env()
        settings = wiring.llm_settings(workspace, env)
        self.runtime = wiring.boot(workspace)
        self.router = wiring.llm_router(workspace, env, settings=settings, progress=self.progress)
        tier = synt_tier(settings)
        self.synt = Synt(self.runtime, provider=_LazyModel(self.router, tier), tier=tier)
        return self.synt

    def __exit__(self, *exc: object) -> None:
        self.router.close()
        self.synt.runtime.close()


def activate(synt: Synt) -> None:
    """A fresh boot registers, checks and activates what was installed, as every boot does."""
    runtime = synt.runtime
    runtime.close()
    synt.runtime = wiring.boot(runtime.workspace)


def defuse(name: str) -> list[str]:
    """Undo a merge: the executors it replaced are active again, it is archived; their names."""
    with wiring.boot(birth=False) as rt:
        return defuse_fusion(rt, name)


def proposals_state() -> dict[str, Any]:
    with wiring.boot(birth=False) as rt:
        return rt.proposals.catch_up(rt.log)
