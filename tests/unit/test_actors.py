"""The actor resolver's rules: the first pairing is the host, the next ones guests; a guest looks and approves nothing."""

from __future__ import annotations

from datetime import datetime, timezone

from domain.household import Household, guest_name
from metnos.runtime.actors import approver_for, level_for

AT = datetime(2030, 1, 1, tzinfo=timezone.utc)


def test_the_first_pairing_is_the_host_and_each_next_a_stable_guest() -> None:
    household = Household.open(at=AT)
    assert household.pair(channel="telegram", address="1", at=AT) == "host"
    guest = household.pair(channel="telegram", address="2", at=AT)
    assert guest == guest_name("telegram", "2") and guest.startswith("guest_") and len(guest) == len("guest_") + 6
    # Paired once: speaking again records nothing.
    events = len(household.pending_events)
    assert household.pair(channel="telegram", address="2", at=AT) == guest and len(household.pending_events) == events


def test_a_guest_runs_read_only_and_its_approvals_are_refused_without_asking() -> None:
    asked = []

    def approve(step: int, executor: str, args: dict, reason: str) -> tuple[bool, str]:
        asked.append(executor)
        return True, "terminal"

    assert level_for("host", "supervised") == "supervised" and level_for("guest_abc123", "full") == "read_only"
    assert approver_for("host", approve)(1, "send_messages", {}, "") == (True, "terminal")
    assert approver_for("guest_abc123", approve)(1, "send_messages", {}, "") == (False, "guest:not_allowed")
    assert asked == ["send_messages"]
