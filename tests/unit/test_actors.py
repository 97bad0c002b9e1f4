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


def test_per_actor_autonomy_and_quotas_come_from_config_toml_with_a_strict_level(tmp_path) -> None:
    import pytest

    from metnos.settings import load
    from metnos.settings.errors import ConfigError

    config = tmp_path / "config.toml"
    config.write_text('[actors.host]\nautonomy = "full"\nmax_schedules = 7\n\n[actors.guest]\nautonomy = "supervised"\n')
    policy = load({}, config_file=config).settings.actors
    assert level_for("host", "supervised", policy) == "full"
    assert level_for("guest_abc123", "read_only", policy) == "supervised"
    assert policy.max_schedules_of("host") == (7, "[actors.host] max_schedules")
    assert policy.max_schedules_of("guest_abc123") == (3, "[actors.guest] max_schedules")
    # Unset, the host's level is the one asked for, a guest's read_only.
    config.write_text("")
    policy = load({}, config_file=config).settings.actors
    assert level_for("host", "supervised", policy) == "supervised" and level_for("guest_abc123", "full", policy) == "read_only"
    # A spelling [runtime] autonomy would take is not a level here: the key is named.
    config.write_text('[actors.guest]\nautonomy = "readonly"\n')
    with pytest.raises(ConfigError, match=r"\[actors\] guest.autonomy"):
        load({}, config_file=config)


def test_the_vaglio_sees_the_principal_and_refuses_for_a_guest_what_would_ask_the_host() -> None:
    from metnos.runtime.step.vaglio import GuardPolicy, vaglio
    from metnos.runtime.turn.judge import _principal_line

    policy = GuardPolicy.core("/home/u")
    args = {"messages": [{"to_user": "lucia", "body": "hi"}]}
    judged = {who: vaglio("send_messages", args, intent_text="tell lucia hi", policy=policy, side_effects=True, idempotent=False,
                          principal=who) for who in ("host", "guest_abc123")}
    host, guest = judged["host"], judged["guest_abc123"]
    assert (host.decision, host.blocked_by) == ("ask", None) and "principal" not in host.to_json()
    assert (guest.decision, guest.blocked_by, guest.to_json()["principal"]) == ("deny", "actor", "guest_abc123")
    assert "actor:guest" in guest.rules and "who gives no approval" in guest.reason
    # What only looks is allowed for a guest as for the host, and says whose it was.
    looked = vaglio("get_now", {}, intent_text="what time is it", policy=policy, principal="guest_abc123")
    assert looked.decision == "allow" and looked.to_json()["principal"] == "guest_abc123"
    # The LLM judge is told a guest's call is a guest's; the host's prompt is as it was.
    assert _principal_line(host) == "" and "guest_abc123, a guest" in _principal_line(guest)


def test_a_guest_approves_only_the_executors_actors_guest_approvals_lists_and_never_past_its_level(tmp_path) -> None:
    from metnos.runtime.step.vaglio import GuardPolicy, vaglio
    from metnos.settings import load
    from metnos.settings.actors import ActorsConfig

    asked = []

    def approve(step: int, executor: str, args: dict, reason: str) -> tuple[bool, str]:
        asked.append(executor)
        return True, "telegram"

    guest, policy = "guest_abc123", GuardPolicy.core("/home/u")
    writes = {"files": [{"path": "/home/u/notes.txt", "content": "hi"}]}
    sends = {"messages": [{"to_user": "lucia", "body": "hi"}]}

    def judged(name: str, args: dict, level: str, approvable: tuple[str, ...]) -> tuple[str, str | None]:
        verdict = vaglio(name, args, intent_text="do it", policy=policy, side_effects=True, idempotent=False, autonomy=level,
                         principal=guest, approvable=approvable)
        return verdict.decision, verdict.blocked_by

    # Unset: none, as before the setting.
    assert ActorsConfig().guest.approvals == () and ActorsConfig().approvals_of(guest) == ()
    assert approver_for(guest, approve, ActorsConfig())(1, "write_files", writes, "") == (False, "guest:not_allowed")
    assert judged("write_files", writes, "supervised", ()) == ("deny", "actor")
    # One listed: the guest is asked about it (on its own channel), and about nothing else.
    config = tmp_path / "config.toml"
    config.write_text('[actors.guest]\nautonomy = "supervised"\napprovals = ["write_files"]\n')
    actors = load({}, config_file=config).settings.actors
    assert actors.approvals_of(guest) == ("write_files",) and actors.approvals_of("host") == ()
    answer = approver_for(guest, approve, actors)
    assert answer(1, "write_files", writes, "") == (True, "telegram")
    assert answer(2, "send_messages", sends, "") == (False, "guest:not_allowed")
    assert asked == ["write_files"]
    assert judged("write_files", writes, "supervised", actors.approvals_of(guest)) == ("ask", None)
    assert judged("send_messages", sends, "supervised", actors.approvals_of(guest)) == ("deny", "actor")
    # The asymmetry holds: a listed approval is asked only where the vaglio asks; at read_only the level refuses first,
    # and what the guard stops no approval reaches.
    assert judged("write_files", writes, "read_only", actors.approvals_of(guest)) == ("deny", "autonomy")
    assert judged("write_files", {"files": [{"path": "/home/u/.ssh/id_rsa", "content": "x"}]}, "full",
                  actors.approvals_of(guest)) == ("deny", "guard")
    # A listed executor is still not the host's: the host's own turn is asked as ever.
    assert vaglio("write_files", writes, intent_text="do it", policy=policy, side_effects=True, idempotent=False,
                  autonomy="supervised", principal="host").decision == "ask"
