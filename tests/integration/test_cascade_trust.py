"""What L1 learns from, and what takes a template away (issue 30).

L1 learns only from turns that ended answered: a turn whose answer the answer
check refused ends ``TurnFailed`` (status ``unverified``) and teaches nothing.
A template a later turn contradicts is dropped by a ``TemplateDropped`` event.
Real LMDB log, the real plans projection, consultation and sink; the turns the
loop cannot end that way yet are written event by event (tests/support/cascade_turns.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.plan import TemplateDrop, template_drop_id
from metnos.runtime.cascade.book import PlanBook, PlanBookError
from metnos.runtime.cascade.consult import consultant_from_env
from metnos.runtime.cascade.contradiction import record_drops
from tests.support.cascade_turns import ask, initialised_runtime, recorded_turn, walk


@pytest.fixture
def runtime(tmp_path: Path):
    with initialised_runtime(tmp_path) as rt:
        for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
            (Path.home() / "notes" / name).write_text(f"{name[0] * 3} and more\n")
        yield rt


def _consult(runtime, text: str):  # noqa: ANN202
    return consultant_from_env(runtime, lambda _plan: []).consult(text)


def _say(name: str) -> str:
    return f"It says: {name[0] * 3} and more"


def _templates(runtime) -> dict:
    return runtime.plans.catch_up(runtime.log)["templates"]


@pytest.mark.parametrize("second_ends", ["answered", "unverified"])
def test_only_a_turn_that_ended_answered_teaches_l1(runtime, second_ends: str) -> None:
    recorded_turn(runtime, "show me ~/notes/a.txt", "~/notes/a.txt", answer=_say("a.txt"))
    second = recorded_turn(runtime, "show me ~/notes/b.txt", "~/notes/b.txt", answer=_say("b.txt"), status=second_ends)
    found = _consult(runtime, "show me ~/notes/c.txt")
    [template] = next(iter(_templates(runtime).values())).values()
    if second_ends == "answered":
        assert found.layer == "L1" and len(template["sources"]) == 2
        return
    # The refused answer is no walk: one walk, no template to propose, no plan to approve.
    assert found.layer is None and second not in template["sources"] and len(template["sources"]) == 1
    with pytest.raises(PlanBookError, match="has no plan to approve"):
        PlanBook(runtime).approve(second, by="test")


@pytest.mark.parametrize("played_ends", ["answered", "unverified", "answered after a refusal"])
def test_a_followed_answer_that_was_refused_drops_the_template(runtime, played_ends: str) -> None:
    for name in ("a.txt", "b.txt"):
        recorded_turn(runtime, f"show me ~/notes/{name}", f"~/notes/{name}", answer=_say(name))
    found = _consult(runtime, "show me ~/notes/c.txt")
    assert found.layer == "L1"
    refused = _say("c.txt") if played_ends == "answered after a refusal" else None
    played = recorded_turn(runtime, "show me ~/notes/c.txt", "~/notes/c.txt", answer=_say("c.txt"),
                           status=played_ends.split()[0], followed=(found.entry, found.plan), rejected=refused)
    state = runtime.plans.catch_up(runtime.log)
    if played_ends == "answered":
        assert state["dropped"] == {} and next(iter(state["templates"].values()))[found.entry]["wins"] == 1
        assert _consult(runtime, "show me ~/notes/d.txt").layer == "L1"
        return
    # The sink that saved the turn recorded the drop: an event of its own, with the turn that contradicted it.
    drop = runtime.log.repository.get(template_drop_id(found.entry, played))
    assert isinstance(drop, TemplateDrop)
    assert state["templates"] == {} and state["contradicted"] == {}
    assert state["dropped"][found.entry]["turn_id"] == played
    assert ("was refused" if refused else "did not end answered") in state["dropped"][found.entry]["reason"]
    assert _consult(runtime, "show me ~/notes/d.txt").layer is None
    assert record_drops(runtime) == []  # nothing left pending


def test_a_contradiction_whose_drop_was_not_written_is_never_proposed_and_is_written_next_time(runtime, monkeypatch) -> None:
    from metnos.runtime.turn.session import LogSink

    for name in ("a.txt", "b.txt"):
        ask(runtime, f"show me ~/notes/{name}", walk(f"~/notes/{name}", _say(name)))
    found = _consult(runtime, "show me ~/notes/c.txt")
    assert found.layer == "L1"
    # Asked past the cascade, the model reads with another argument: another chain. Its turn is
    # saved, its drop is not (as if the process died between the two writes).
    monkeypatch.setattr(LogSink, "_drop_contradicted", lambda self: None)
    *_, other = ask(runtime, "show me ~/notes/c.txt", walk("~/notes/c.txt", _say("c.txt"), max_bytes=4096), cache=False)
    monkeypatch.undo()
    state = runtime.plans.catch_up(runtime.log)
    assert state["contradicted"][found.entry]["turn_id"] == other and "another chain" in state["contradicted"][found.entry]["reason"]
    assert _consult(runtime, "show me ~/notes/d.txt").layer is None
    # The next turn's sink writes it.
    ask(runtime, "show me ~/notes/d.txt", walk("~/notes/d.txt", _say("d.txt"), max_bytes=4096))
    assert runtime.log.repository.get(template_drop_id(found.entry, other)).template_id == found.entry
    state = runtime.plans.catch_up(runtime.log)
    assert state["contradicted"] == {} and found.entry not in next(iter(state["templates"].values()))
