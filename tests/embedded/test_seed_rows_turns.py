"""Issue 37's rows where a turn is involved, on the real 1.5B: the language of the request, a
guest's turn, the vaglio reading the mnestome.

Each test asserts what the runtime decides and records (the language it detected and answered
in, the autonomy a guest's turn ran at and what it left untouched, the hint the judge was given)
and that the answer holds words only the user's files could give, never the model's exact words.
Every turn replays clean from the log alone.

The claim is the 1.5B's, the default model: with a smaller model chosen ($METNOS_MODEL) the
module skips and says so. Run it with
  METNOS_MODEL=1.5b METNOS_REQUIRE_EMBEDDED=1 python3 -m pytest -m embedded tests/embedded/test_seed_rows_turns.py
The model is served with one thread (two CPUs shared with the rest of the step).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.mechanisms.llm.model_files import MODELS
from metnos.mechanisms.sandbox.bwrap import probe
from metnos.runtime.booted import Runtime
from metnos.services.host import RuntimeHost
from metnos.settings.i18n.detect import language_of
from metnos.settings.workspace import Workspace
from tests.support.embedded import served_home

pytestmark = [pytest.mark.embedded, pytest.mark.bwrap, pytest.mark.timeout(1200),
              pytest.mark.skipif(not probe().works, reason=f"bubblewrap cannot run: {probe().error}")]

CLAIMED = MODELS["1.5b"].filename
# Words found in the files only: an answer can have them from nowhere else.
SHOPPING = "Comprare il latte di capra.\nRitirare le scarpe dal calzolaio.\nPagare la bolletta del gas.\n"
OLD_NOTE = "An old draft about the quokka census.\n"


@dataclass
class Home:
    user: Path
    workspace: Workspace


def write_files(user: Path) -> None:
    (user / "note").mkdir(parents=True, exist_ok=True)
    (user / "note" / "spesa.txt").write_text(SHOPPING)
    (user / "drafts").mkdir()
    (user / "drafts" / "old.txt").write_text(OLD_NOTE)
    (user / "docs").mkdir()
    for name in ("zanzibar.md", "lisbon.md"):
        (user / "docs" / name).write_text(f"# {name[:-3].title()}\nA page about {name[:-3]}.\n")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    with served_home(tmp_path_factory, "embedded-seed-rows", CLAIMED, "issue 37's turns are", write_files) as user:
        yield Home(user, Workspace.from_env())


def ask(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    capsys.readouterr()
    main(["ask", "--json", *argv])
    return orjson.loads(capsys.readouterr().out)


def events(capsys: pytest.CaptureFixture[str], turn_id: str) -> list[dict]:
    capsys.readouterr()
    assert main(["events", "--json", "--aggregate", turn_id]) == 0
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def of(rows: list[dict], kind: str) -> list[dict]:
    return [r["state"] for r in rows if r["topic"].endswith(kind)]


def replays_clean(capsys: pytest.CaptureFixture[str], turn_id: str) -> None:
    capsys.readouterr()
    code = main(["replay", turn_id])
    out = capsys.readouterr().out
    assert code == 0, out


def test_an_italian_request_is_answered_in_italian(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    """seeds/002 ch. 11.2.5: the turn detects the request's language, records it, and answers in it."""
    out = ask(capsys, "leggi ~/note/spesa.txt e dimmi cosa devo comprare")
    assert out["status"] == "answered", out
    started = of(events(capsys, out["turn_id"]), "TurnStarted")[0]
    assert started["language"] == "it"
    answer = out["answer"]
    assert "latte" in answer.lower() or "capra" in answer.lower(), answer
    assert language_of(answer, ("en", "it")) == "it", answer
    replays_clean(capsys, out["turn_id"])


def test_a_guest_s_turn_runs_read_only_and_the_host_s_does_not(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    """seeds/002 ch. 11.2.4: the first device paired is the host, the next a guest; the guest's turn
    runs read-only (the delete it asks for is not run, and no approval is asked of anyone), the
    host's same request runs once approved."""
    asked: list[str] = []

    def approve(step: int, executor: str, args: dict, reason: str) -> tuple[bool, str]:
        asked.append(executor)
        return True, "test:yes"

    runtime = Runtime.boot(home.workspace)
    try:
        host = RuntimeHost(runtime)
        first, second = host.pair("http", "laptop"), host.pair("http", "phone")
        assert first == "host" and second.startswith("guest_")
        request = "delete the file ~/drafts/old.txt"
        guest = host.ask(request, approver=approve, channel="http", principal=second)
        assert (home.user / "drafts" / "old.txt").read_text() == OLD_NOTE, guest
        assert asked == [], asked
        made = host.ask(request, approver=approve, channel="http", principal=first)
        assert not (home.user / "drafts" / "old.txt").exists(), made
        assert asked == ["delete_files"], asked
    finally:
        runtime.close()
    started = {t.turn_id: of(events(capsys, t.turn_id), "TurnStarted")[0] for t in (guest, made)}
    assert (started[guest.turn_id]["principal"], started[guest.turn_id]["autonomy"]) == (second, "read_only")
    assert started[made.turn_id]["principal"] == "host"
    for t in (guest, made):
        replays_clean(capsys, t.turn_id)


def test_a_strong_mnest_is_a_hint_to_the_judge(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    """seeds/004 ch. 9: a pair of executors the user's turns have walked (a seed mnest, reinforced by a
    turn) is a hint of telos alignment when the next turn walks it again: the verdict records it."""
    turns = [ask(capsys, "find the markdown files in ~/docs and describe them") for _ in range(2)]
    assert [t["status"] for t in turns] == ["answered", "answered"], turns
    verdicts = [[(s["step"], s["verdict"]) for s in of(events(capsys, t["turn_id"]), "StepJudged")] for t in turns]
    hinted = [v for _, v in verdicts[1] if "mnest_hint" in v]
    assert hinted, verdicts
    assert hinted[0]["mnest_hint"]["from"] == "find_files"
    assert "judge:mnest_hint" in hinted[0]["rules"] and "a strong mnest from find_files" in hinted[0]["reason"]
    for t in turns:
        replays_clean(capsys, t["turn_id"])


def schedules(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    capsys.readouterr()
    assert main(["schedule", "list", "--json"]) == 0
    return orjson.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("request_text", "cron"), [
    ("Every Monday at 9:00 remind me to water the plants.", "0 9 * * 1"),
    ("ogni giorno alle 8 ricordami di prendere le vitamine", "0 8 * * *"),
])
def test_a_schedule_in_words_is_the_one_asked_for(home: Home, capsys: pytest.CaptureFixture[str], request_text: str, cron: str) -> None:
    """seeds/000 ch. 11: a recurring request made into one schedule at its time, running until cancelled;
    the 1.5B had given "every Monday" an expiry in the year 1000 and made the same schedule ten times."""
    before = {s["id"] for s in schedules(capsys)}
    out = ask(capsys, request_text, "--yes")
    assert out["status"] in ("answered", "unverified"), out
    made = [s for s in schedules(capsys) if s["id"] not in before]
    assert [(s["cron"], s["count"], s["expiry"]) for s in made] == [(cron, None, None)], made
    replays_clean(capsys, out["turn_id"])
