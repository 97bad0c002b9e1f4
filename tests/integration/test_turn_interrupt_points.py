"""Where a stop signal lands in a turn: never inside a step that runs or commits.

Real signals sent to this very process while a turn runs in it, on a real
LMDB log: SIGTERM while an executor runs waits until the step is committed,
SIGINT while the user is asked for approval lands at once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from uuid import UUID

import pytest

from domain.invocation import Invocation
from domain.turn import Turn
from metnos.mechanisms.llm.messages import LLMReply, ToolCall
from metnos.runtime.booted import Runtime
from metnos.runtime.turn.interrupts import InterruptGate
from metnos.runtime.lease import TurnLease, lock_path
from metnos.runtime.turn.loop import TurnRequest
from metnos.settings.workspace import Workspace
from replay.replayer import Replayer
from tests.support.turn_ports import InProcessPorts
from bench._turns import turn_loop


def reply_calling(name: str, args: dict) -> LLMReply:
    return LLMReply(text="", tool_calls=(ToolCall("call_1", name, args),), call_form="native", raw={"n": 1})


FINAL = LLMReply(text="done", tool_calls=(), call_form="none", raw={"n": 2})


class ScriptedPorts(InProcessPorts):
    def __init__(self, runtime, replies) -> None:  # noqa: ANN001
        super().__init__(runtime)
        self.replies = list(replies)
        self.asked = 0
        self.executed: list[str] = []
        self.lock_held_during_step: bool | None = None

    def ask_llm(self, tier, messages, tools, *, tool_choice="auto", constraint=None):  # noqa: ANN001, ANN201
        self.asked += 1
        return self.replies.pop(0)

    def call_executor(self, name, args, *, turn_id, step, actor, channel):  # noqa: ANN001, ANN201
        self.executed.append(name)
        claim = TurnLease.claim(self.runtime.workspace, turn_id, create=False)
        self.lock_held_during_step = claim is None and lock_path(self.runtime.workspace, turn_id).exists()
        if claim is not None:
            claim.release()
        return super().call_executor(name, args, turn_id=turn_id, step=step, actor=actor, channel=channel)


class SignalledDuringExecutor(ScriptedPorts):
    def call_executor(self, *a, **kw):  # noqa: ANN002, ANN003, ANN201
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the executor goes on working: the signal must not cut it
        return super().call_executor(*a, **kw)


class SignalledDuringApproval(ScriptedPorts):
    def approve(self, step, executor, args, reason):  # noqa: ANN001, ANN201
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)  # a person who never answers; the signal ends the wait
        return True, "never"


class ModelThatNeverAnswers(ScriptedPorts):
    def ask_llm(self, tier, messages, tools, *, tool_choice="auto", constraint=None):  # noqa: ANN001, ANN201
        self.asked += 1
        time.sleep(30)  # a model far slower than the stop
        return self.replies.pop(0)


def run_signalled(ports_class: type, replies: list[LLMReply]) -> tuple[Runtime, ScriptedPorts, object]:
    runtime = Runtime.boot(Workspace.from_env(), birth=False)
    ports = ports_class(runtime, replies)
    loop = turn_loop(runtime, ports, dict(os.environ))
    gate = InterruptGate()
    loop.interrupts = gate
    with gate.installed():
        outcome = loop.run(TurnRequest(text="read my note"))
    return runtime, ports, outcome


def turn_events(runtime: Runtime, turn_id: str) -> list:
    return list(runtime.log.events.get(UUID(turn_id)))


def test_sigterm_while_an_executor_runs_waits_for_the_step_to_be_committed(home: Path) -> None:
    (home / "note.md").write_text("hello")
    runtime, ports, outcome = run_signalled(SignalledDuringExecutor, [reply_calling("read_files", {"paths": ["~/note.md"]}), FINAL])
    with runtime:
        assert outcome.status == "interrupted" and outcome.steps == 1
        assert ports.asked == 1, "the model must not be asked again after the signal"
        assert ports.lock_held_during_step is True
        events = turn_events(runtime, outcome.turn_id)
        names = [type(e).__name__ for e in events]
        assert names[-3:] == ["StepInvoked", "ObservationRecorded", "TurnInterrupted"]
        closing = events[-1]
        assert (closing.signal, closing.step, closing.during) == ("SIGTERM", 1, "between steps")
        invocation = events[-3].invocation_id
        assert any(isinstance(e, Invocation.InvocationCompleted) for e in runtime.log.events.get(UUID(invocation)))
        assert not lock_path(runtime.workspace, outcome.turn_id).exists()
        result = Replayer(runtime).replay(outcome.turn_id)
        assert result.same_path, result.divergence
        assert result.stopped == "interrupted by SIGTERM at step 1"


def test_sigint_while_waiting_for_approval_lands_at_once_and_nothing_runs(home: Path) -> None:
    started = time.monotonic()
    args = {"files": [{"path": "~/out.txt", "content": "x"}]}
    runtime, ports, outcome = run_signalled(SignalledDuringApproval, [reply_calling("write_files", args), FINAL])
    with runtime:
        assert time.monotonic() - started < 25
        assert outcome.status == "interrupted" and ports.executed == []
        assert not (home / "out.txt").exists()
        events = turn_events(runtime, outcome.turn_id)
        assert [type(e).__name__ for e in events[-2:]] == ["ApprovalAsked", "TurnInterrupted"]
        assert events[-1].during == "while waiting for approval"
        assert Replayer(runtime).replay(outcome.turn_id).same_path


def test_a_stop_asked_from_another_thread_gives_up_the_wait_on_the_model(home: Path) -> None:
    # As the daemon runs a turn: on a thread of its own, the gate taking no signals.
    runtime = Runtime.boot(Workspace.from_env(), birth=False)
    ports = ModelThatNeverAnswers(runtime, [FINAL])
    loop = turn_loop(runtime, ports, dict(os.environ))
    gate = loop.interrupts = InterruptGate()
    gate.accept_stops_from_other_threads()
    ended: list = []
    turn = threading.Thread(target=lambda: ended.append(loop.run(TurnRequest(text="read my note"))))
    turn.start()
    while not ports.asked:
        time.sleep(0.01)
    asked_at = time.monotonic()
    gate.stop_at_next_checkpoint(signal.SIGTERM)
    turn.join(timeout=25)
    with runtime:
        assert ended, "the turn still waits for the model"
        assert time.monotonic() - asked_at < 5
        [outcome] = ended
        assert outcome.status == "interrupted"
        events = turn_events(runtime, outcome.turn_id)
        assert [type(e).__name__ for e in events[-2:]] == ["LLMAsked", "TurnInterrupted"]
        assert (events[-1].signal, events[-1].during) == ("SIGTERM", "while waiting for the model")
        assert Replayer(runtime).replay(outcome.turn_id).same_path


def test_an_abandonable_wait_hands_back_what_the_work_returns_or_raises() -> None:
    gate = InterruptGate()
    # Nobody stops this gate from another thread: the work runs on the caller's thread, no thread spent.
    assert gate.abandonable(threading.get_ident) == threading.get_ident()
    gate.accept_stops_from_other_threads()
    assert gate.abandonable(lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        gate.abandonable(lambda: 1 / 0)
    # Where the gate takes the signals itself, the work runs on the caller's thread.
    with gate.installed():
        assert gate.abandonable(threading.get_ident) == threading.get_ident()
    assert gate.abandonable(threading.get_ident) != threading.get_ident()


def test_a_gate_nobody_installed_never_fires() -> None:
    gate = InterruptGate()
    with gate.deferring():
        gate.checkpoint()
        with gate.waiting():
            pass
    assert gate.pending is None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_outside_a_turn_a_signal_lands_at_once(sig: signal.Signals) -> None:
    from metnos.runtime.turn.interrupts import Interrupted

    gate = InterruptGate()
    with gate.installed(), pytest.raises(Interrupted) as caught:
        os.kill(os.getpid(), sig)
        time.sleep(5)
    assert caught.value.exit_code == 128 + sig.value
    assert signal.getsignal(sig) is not gate._handle
