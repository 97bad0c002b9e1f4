"""Issue 35 item 5, done when: a follow-up that refers to the previous answer is right on the real 1.5B.

"read ~/notes/a.txt and tell me its first line", then `metnos ask --continue "and the last one?"`:
the follow-up names neither the file nor the line, and must answer with the file's last line,
from what the conversation recorded. Both turns replay clean from the log alone.

The claim is the 1.5B's: with a smaller model chosen ($METNOS_MODEL) the module skips and says so.
Run it with
  METNOS_MODEL=1.5b METNOS_REQUIRE_EMBEDDED=1 python3 -m pytest -m embedded tests/embedded/test_conversation_turns.py
The model is served with one thread (two CPUs shared with the rest of the step).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.mechanisms.llm.model_files import MODELS
from metnos.mechanisms.sandbox.bwrap import probe
from tests.support.embedded import served_home

pytestmark = [pytest.mark.embedded, pytest.mark.bwrap, pytest.mark.timeout(900),
              pytest.mark.skipif(not probe().works, reason=f"bubblewrap cannot run: {probe().error}")]

CLAIMED = MODELS["1.5b"].filename
# Words found in the file only: the answer can have them from nowhere else.
FIRST = "Buy quokka seeds at the market."
LAST = "Return the zanzibar atlas to Lucia."
NOTE = f"{FIRST}\nWater the lemon tree.\nCall the plumber about the sink.\n{LAST}\n"


def write_note(user: Path) -> None:
    (user / "notes").mkdir(parents=True, exist_ok=True)
    (user / "notes" / "a.txt").write_text(NOTE)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with served_home(tmp_path_factory, "embedded-conversation", CLAIMED, "the conversation turns are", write_note) as user:
        yield user


def ask(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    capsys.readouterr()
    code = main(["ask", "--json", *argv])
    out = orjson.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "answered", out
    return out


def started(capsys: pytest.CaptureFixture[str], turn_id: str) -> dict:
    capsys.readouterr()
    assert main(["events", "--json", "--aggregate", turn_id]) == 0
    rows = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    return next(r["state"] for r in rows if r["topic"].endswith("TurnStarted"))


def test_and_the_last_one_follows_the_first_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = ask(capsys, "read ~/notes/a.txt and tell me its first line")
    assert "quokka seeds" in one["answer"], one["answer"]
    two = ask(capsys, "--continue", "and the last one?")
    # The file's last line, which the follow-up named in no word of its own; not the first again.
    assert "zanzibar atlas" in two["answer"], two["answer"]
    assert "quokka" not in two["answer"], two["answer"]
    conversation = started(capsys, two["turn_id"])["conversation"]
    assert conversation["id"] == one["turn_id"] and [t["turn"] for t in conversation["earlier"]] == [one["turn_id"]]
    for turn_id in (one["turn_id"], two["turn_id"]):
        capsys.readouterr()
        assert main(["replay", turn_id]) == 0, capsys.readouterr().out
