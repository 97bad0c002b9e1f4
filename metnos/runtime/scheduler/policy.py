"""What happens after one attempt of a firing: on_failure, retries, recovery, auto-cancel.

Pure. ``on_failure`` (seeds/000 "scheduler"):

* ``skip``: the failure is recorded and the schedule waits for its next slot.
* ``retry``: one more attempt of the same slot, at once; then as ``skip``.
* ``notify`` (the default): one retry, then the user is told.
* ``cancel``: the schedule is cancelled at the first failure.

A retry needs an idempotent target and a failure that another try could
change: a refusal (unknown or quarantined executor, arguments outside the
schema or the policy) would only fail again.

An attempt cut short by a crash (``FiringStarted`` in the log, no
``FiringFinished``) has an unknown outcome. It is recorded as failed with
kind ``Interrupted``; an idempotent target then gets one *recovery* attempt,
recorded as such, so the firing is neither lost nor silently doubled. A
target with side effects that is not idempotent (sending a message) is never
re-run blindly: the interruption is a failure and the policy applies (the
user is told under ``notify``). Manual runs (run-now) are never recovered.

After a slot's final failure, ``max_consecutive_failures`` failed slots in a
row cancel the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.schedule import MAX_ATTEMPTS

PERMANENT = frozenset({"UnknownExecutor", "Quarantined", "PolicyViolation", "SchemaViolation", "UnknownCallback", "PipingError",
                       "NotApproved", "VaglioDenied"})
INTERRUPTED = "Interrupted"


@dataclass(frozen=True)
class Decision:
    final: bool
    # none | skip | retry | recover | notify | cancel
    action: str
    cancel: str | None = None


def after_attempt(
    *, on_failure: str, ok: bool, kind: str, attempt: int, idempotent: bool, manual: bool,
    consecutive_failures: int, max_consecutive_failures: int | None,
) -> Decision:
    if ok:
        return Decision(True, "none")
    more = attempt < MAX_ATTEMPTS and idempotent and not manual
    if kind == INTERRUPTED:
        if more:
            return Decision(False, "recover")
    elif more and kind not in PERMANENT and on_failure in ("retry", "notify"):
        return Decision(False, "retry")
    if manual:
        return Decision(True, "notify" if on_failure == "notify" else "none")
    if on_failure == "cancel":
        return Decision(True, "cancel", cancel="on_failure")
    action = {"skip": "skip", "retry": "none", "notify": "notify"}[on_failure]
    if max_consecutive_failures is not None and consecutive_failures + 1 >= max_consecutive_failures:
        return Decision(True, action, cancel="consecutive_failures")
    return Decision(True, action)
