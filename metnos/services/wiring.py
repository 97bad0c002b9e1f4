"""Wiring the runtime, in one place: the booted Runtime, the LLM router and what a turn's model needs.

Every way in (the CLI's commands, the daemon, Telegram, MCP) gets its runtime
and its router here, so that they are built the same way: the same
workspace, the same [llm] settings read with the same environment (with the
``--model`` override of one command), the same check that a chosen embedded
model is on disk before anything boots.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from metnos.mechanisms.llm.errors import ModelNotInstalled
from metnos.mechanisms.llm.model_files import install_hint
from metnos.mechanisms.llm.router import LLMRouter, embedded_model_files
from metnos.mechanisms.llm.transport import public_url
from metnos.runtime.booted import Runtime
from metnos.runtime.scheduler.clock import clock_from_env
from metnos.services import outgoing, remote_calls
from metnos.settings.llm_tiers import ENV_EMBEDDED_MODEL, LLMSettings
from metnos.settings.loader import for_workspace, in_force
from metnos.settings.workspace import Workspace

__all__ = ["Runtime", "boot", "boot_scheduled", "llm_router", "llm_settings", "model_limits", "require_embedded_models", "turn_env"]


def boot(workspace: Workspace | None = None, *, birth: bool = True, reuse_births: bool = True,
         clock: Callable[[], datetime] | None = None) -> Runtime:
    """The booted runtime of the workspace (``METNOS_HOME``'s by default). ``birth=False`` only reads
    (the birth tests are not run); ``reuse_births=False`` runs every one (the daemon's start, ``executors verify``)."""
    extra = {} if clock is None else {"clock": clock}
    runtime = Runtime.boot(workspace or in_force().workspace, birth=birth, reuse_births=reuse_births, **extra)
    # An executor whose manifest names a device runs there (docs/remote.md).
    runtime.invoker.remote = remote_calls.step_runner(runtime)
    # A turn's send_messages to Telegram or mail is queued in the outbox of events (the daemon sends what fails).
    runtime.outgoing = outgoing.step_port(outgoing.outbox_of(runtime))
    return runtime


def boot_scheduled(*, birth: bool = False, reuse_births: bool = True) -> Runtime:
    """A runtime on the scheduler's clock (``METNOS_CLOCK`` in tests, else the system's)."""
    return boot(birth=birth, reuse_births=reuse_births, clock=clock_from_env())


def turn_env(model: str | None = None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a turn's settings are read with: ``--model`` names the embedded model for this one."""
    out = dict(os.environ if env is None else env)
    if model:
        out[ENV_EMBEDDED_MODEL] = model
    return out


def llm_settings(workspace: Workspace, env: Mapping[str, str] | None = None) -> LLMSettings:
    """[llm] of config.toml with the environment's overrides: the command's own when ``env`` is not another."""
    return for_workspace(workspace, env).llm()


def require_embedded_models(settings: LLMSettings, workspace: Workspace) -> None:
    """Before any boot: a chosen embedded model that is not on disk is one line naming the fix, not a failed turn."""
    for path in embedded_model_files(settings, workspace):
        if not path.is_file():  # a warm server is only ever reused for the same file, so none can stand in
            raise ModelNotInstalled(str(path), install_hint(path))


def llm_router(workspace: Workspace, env: Mapping[str, str] | None = None, *, settings: LLMSettings | None = None,
               progress: Callable[[str], None] | None = None) -> LLMRouter:
    """The router every model call of a process goes through; ``progress`` hears the model starting."""
    settings = settings if settings is not None else llm_settings(workspace, env)
    extra: dict[str, Any] = {} if progress is None else {"progress": progress}
    return LLMRouter(settings, workspace, env=env, **extra)


def model_limits(workspace: Workspace, settings: LLMSettings | None = None) -> Callable[[str], tuple[str, float]]:
    """For a tier: where its model is (for people: no secret in the URL) and how long Metnos waits for it."""
    settings = settings if settings is not None else llm_settings(workspace)

    def limits(tier: str) -> tuple[str, float]:
        config = settings.tier(tier).config
        url = config.effective_url
        return (public_url(url) if url else "the embedded model"), config.timeout_s

    return limits
