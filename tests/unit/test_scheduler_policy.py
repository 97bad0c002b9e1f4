"""on_failure, retries, recovery of an interrupted attempt, auto-cancel."""

from __future__ import annotations

import pytest

from metnos.runtime.scheduler.policy import Decision, after_attempt


def decide(**kw) -> Decision:
    base = {"on_failure": "notify", "ok": False, "kind": "Network", "attempt": 1, "idempotent": True, "manual": False,
            "consecutive_failures": 0, "max_consecutive_failures": 3}
    return after_attempt(**(base | kw))


def test_success_is_final() -> None:
    assert decide(ok=True, kind="ok") == Decision(True, "none")


@pytest.mark.parametrize(("policy", "first", "second"), [
    ("skip", Decision(True, "skip"), None),
    ("retry", Decision(False, "retry"), Decision(True, "none")),
    ("notify", Decision(False, "retry"), Decision(True, "notify")),
    ("cancel", Decision(True, "cancel", "on_failure"), None),
])
def test_each_policy(policy: str, first: Decision, second: Decision | None) -> None:
    assert decide(on_failure=policy) == first
    if second is not None:
        assert decide(on_failure=policy, attempt=2) == second


def test_permanent_failures_and_side_effects_are_not_retried() -> None:
    assert decide(kind="UnknownExecutor") == Decision(True, "notify")
    assert decide(idempotent=False) == Decision(True, "notify")


def test_consecutive_failures_cancel() -> None:
    assert decide(on_failure="skip", consecutive_failures=2) == Decision(True, "skip", "consecutive_failures")
    assert decide(on_failure="skip", consecutive_failures=2, max_consecutive_failures=None) == Decision(True, "skip")
    assert decide(on_failure="skip", consecutive_failures=1) == Decision(True, "skip")


def test_interrupted_attempt_is_recovered_once_only_if_idempotent() -> None:
    assert decide(kind="Interrupted", on_failure="skip") == Decision(False, "recover")
    assert decide(kind="Interrupted", attempt=2) == Decision(True, "notify")
    assert decide(kind="Interrupted", idempotent=False) == Decision(True, "notify")


def test_manual_runs_never_retry_nor_cancel() -> None:
    assert decide(manual=True) == Decision(True, "notify")
    assert decide(manual=True, on_failure="cancel", consecutive_failures=5) == Decision(True, "none")
    assert decide(manual=True, kind="Interrupted") == Decision(True, "notify")
