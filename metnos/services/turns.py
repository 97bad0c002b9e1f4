"""Running a turn, and reading the turns that ran.

A turn runs with the ports its caller implements for its medium
(metnos/runtime/turn/ports.py): the approver (a terminal prompt, an HTTP
question, Telegram buttons), the asker for a dialog (a terminal prompt, a
pending dialog over HTTP, the next Telegram message), the progress sink (``observer`` for the turn's
events, ``wrap_llm`` around each model call) and the channel's name. What
the turn records is the same whichever way in asked; only ``channel`` and
``actor`` say who.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metnos.runtime.booted import Runtime
from metnos.runtime.cascade.book import PlanBook
from metnos.mechanisms.llm.errors import LLMError
from metnos.runtime.turn.direct import CALL_MODE, call_text
from metnos.runtime.turn.interrupts import InterruptGate
from metnos.runtime.step.dialog_tools import Question
from metnos.runtime.turn.ports import Approver, Asker
from metnos.runtime.turn.session import EmptyRequest, TurnOutcome, check_request, run_turn
from metnos.services import outgoing, wiring
from metnos.services.undo_that import asks_to_undo, undo_that
from metnos.settings.loader import Loaded, for_environment, for_workspace, in_force

# Re-exported for the adapters: the port they implement, the outcome they format.
__all__ = ["Approver", "Asker", "EmptyRequest", "Question", "TurnOutcome", "asked", "check_request", "run"]


def run(runtime: Runtime, text: str, *, approver: Approver, router: Any, env: Mapping[str, str] | None, channel: str,
        actor: str = "user", principal: str = "host", observer: Callable[[Any], None] | None = None, wrap_llm: Callable[[Any], Any] | None = None,
        interrupts: InterruptGate | None = None, cache: bool = True, level: str | None = None, mode: str | None = None,
        overrides: Sequence[str] = (), settings: Loaded | None = None, asker: Asker | None = None,
        conversation: str | None = None, new_conversation: bool = False, confirm_schedules: bool = False,
        caller: dict[str, Any] | None = None) -> TurnOutcome:
    """One turn on a booted runtime with a router kept by the caller (a host keeps it warm across turns).
    ``settings``: those read for this turn; None, the command's own (or those ``env`` gives).
    ``conversation``: the key of the conversation the turn continues (a chat, the dashboard, ``cli``), or starts
    with ``new_conversation``; None, a turn alone (docs/turns.md, "Conversations"). "Undo that" in a
    conversation undoes its turn before, with the approver's yes (metnos/services/undo_that.py)."""
    if conversation is not None and not new_conversation and asks_to_undo(text):
        loaded = settings if settings is not None else for_workspace(runtime.workspace, env)
        return undo_that(runtime, key=conversation, channel=channel, approver=approver, principal=principal,
                         idle_minutes=loaded.settings.conversation.idle_minutes)
    return run_turn(runtime, text, approver=approver, router=router, env=env, actor=actor, principal=principal, channel=channel, observer=observer,
                    wrap_llm=wrap_llm, interrupts=interrupts, cache=cache, level=level, mode=mode, overrides=overrides,
                    settings=settings, asker=asker, conversation=conversation, new_conversation=new_conversation,
                    confirm_schedules=confirm_schedules, caller=caller)


# The key of the conversation `metnos ask --continue` follows: the last turn asked from the command line.
CLI_CONVERSATION = "cli"


@dataclass
class Asked:
    """A turn run by a command that boots for it alone, and the plan it may offer to keep."""

    outcome: TurnOutcome
    offer: str | None
    # The turn's messages not sent yet (queued for the daemon) or given up, in a sentence; "" when none.
    outbox: str = ""


def asked(text: str, *, approver: Approver, model: str | None = None, overrides: Sequence[str] = (),
          progress: Callable[[str], None] | None = None, observer: Callable[[Any], None] | None = None,
          waiting: Callable[[Callable[[str], tuple[str, float]]], Callable[[Any], Any]] | None = None, interrupts: InterruptGate | None = None, cache: bool = True,
          level: str | None = None, mode: str | None = None, offer_plan: bool = False, asker: Asker | None = None,
          continuing: bool = False) -> Asked:
    """``metnos ask``: boot, wire the router, run one turn on the ``cli`` channel, close.

    ``waiting``: given the tiers' limits (wiring.model_limits), the wrapper around each model call that
    tells the user the model is thinking. ``offer_plan``: after an answer, say how to keep its plan.
    ``continuing`` (``--continue``): the turn follows the last ``cli`` turn, unless that conversation has gone idle."""
    check_request(text)
    # The command's settings, read once before it ran (--model, --mode, --autonomy and --set with them: a key
    # set for this turn that config.toml would refuse stopped there, before any model started). A caller
    # outside a command that names a model gets the settings with that model.
    loaded = in_force() if model is None else for_environment(wiring.turn_env(model))
    env = None if model is None else wiring.turn_env(model)
    workspace = loaded.workspace
    settings = loaded.llm()
    wiring.require_embedded_models(settings, workspace)
    with wiring.boot(workspace) as runtime, wiring.llm_router(workspace, env, settings=settings, progress=progress) as router:
        wrap_llm = waiting(wiring.model_limits(workspace, settings)) if waiting is not None else None
        outcome = run(runtime, text, approver=approver, router=router, env=env, channel="cli", observer=observer,
                      wrap_llm=wrap_llm, interrupts=interrupts, cache=cache, level=level, mode=mode, overrides=overrides,
                      settings=loaded if model is None else None, asker=asker, conversation=CLI_CONVERSATION if continuing else None,
                      # A schedule the turn makes is shown at the terminal with its next firings, saved on a yes (or --yes).
                      confirm_schedules=True)
        # A follow-up's words are not a plan's (and "undo that" answers for the turn it undid): nothing to keep.
        offer = PlanBook(runtime).offer(outcome.turn_id) if offer_plan and not continuing and outcome.status == "answered" else None
        said = outgoing.notice(outgoing.outbox_of(runtime), outcome.turn_id)
    return Asked(outcome, offer, said)


class NoModel:
    """The router of a call turn (metnos/runtime/turn/direct.py): the channel chose the call, so no model is
    asked; should the loop ever ask one, the turn fails saying so, and nothing is made up."""

    settings = None

    def for_tier(self, tier: str) -> Any:
        raise LLMError("a call a channel chose is run as it is: no model is asked in its turn")

    def close(self) -> None:
        pass


def call(runtime: Runtime, name: str, args: dict[str, Any], *, approver: Approver, channel: str, actor: str,
         env: Mapping[str, str] | None = None, observer: Callable[[Any], None] | None = None,
         interrupts: InterruptGate | None = None, settings: Loaded | None = None,
         caller: dict[str, Any] | None = None) -> TurnOutcome:
    """One call a channel chose (an MCP client's tool call) as a turn of its own: listed, replayable, undoable."""
    return run_turn(runtime, call_text(name, args), approver=approver, router=NoModel(), env=env, actor=actor, channel=channel,
                    observer=observer, interrupts=interrupts, cache=False, mode=CALL_MODE, settings=settings, caller=caller)
