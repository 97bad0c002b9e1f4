"""The delivery outbox's pure rules (domain/delivery.py) and its fold (projections/deliveries.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from domain.delivery import FAILED, GIVEN_UP, QUEUED, OutgoingMessage, RetryRule
from projections.deliveries import DeliveriesFold, undelivered

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def test_the_wait_doubles_up_to_its_ceiling_and_the_bound_ends_the_tries() -> None:
    rule = RetryRule(first_delay_s=2, max_delay_s=30, max_attempts=6)
    assert [rule.delay_s(n) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]
    assert rule.next_attempt_at(1, T0) == T0 + timedelta(seconds=2)
    assert rule.next_attempt_at(5, T0) == T0 + timedelta(seconds=30)
    assert rule.next_attempt_at(6, T0) is None


@pytest.mark.parametrize("bad", [dict(first_delay_s=0), dict(first_delay_s=5, max_delay_s=1), dict(max_attempts=0)])
def test_a_rule_that_could_never_send_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="retry rule"):
        RetryRule(**bad)


def test_a_message_fails_waits_and_is_given_up_at_the_bound_and_the_fold_keeps_what_was_lost() -> None:
    rule = RetryRule(first_delay_s=1, max_delay_s=10, max_attempts=2)
    fold, state = DeliveriesFold(), DeliveriesFold().initial()
    lost = OutgoingMessage.queued(id=uuid4(), at=T0, channel="telegram", address="42", text="the answer", kind="answer", turn_id="t1")
    sent = OutgoingMessage.queued(id=uuid4(), at=T0, channel="telegram", address="42", text="a notice", kind="notice")
    assert lost.due_in_s(T0) == 0 and lost.status == QUEUED
    assert lost.failed(attempt=1, cause="502", rule=rule, at=T0) is False
    assert lost.status == FAILED and lost.due_in_s(T0) == 1.0 and lost.due_in_s(T0 + timedelta(seconds=5)) == 0
    assert lost.failed(attempt=2, cause="502 again", rule=rule, at=T0 + timedelta(seconds=1)) is True
    assert lost.status == GIVEN_UP and lost.due_in_s(T0 + timedelta(days=1)) is None
    sent.sent(attempt=1, receipt="1001", at=T0)
    for position, event in enumerate([*lost.collect_events(), *sent.collect_events()], 1):
        fold.apply(state, event, position)
    # The sent one leaves the view (its text stays in the log); the lost one stays, with its cause.
    assert state["sent"] == 1 and list(state["messages"]) == [str(lost.id)]
    [shown] = undelivered(state, "t1")
    assert (shown["status"], shown["attempts"], shown["cause"], shown["text"]) == (GIVEN_UP, 2, "502 again", "the answer")
    assert undelivered(state, "another turn") == []
