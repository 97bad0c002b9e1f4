"""A turn's events as `metnos events --json` prints them, for tests that run `main` in process."""

from __future__ import annotations

import orjson

from metnos.adapters.cli import main


def events(capsys, turn_id: str) -> list[dict]:  # noqa: ANN001 - pytest's capsys
    capsys.readouterr()
    main(["events", "--json", "--aggregate", turn_id])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def of(evs: list[dict], name: str) -> list[dict]:
    """The states of the events named ``name`` (the class, e.g. "StepRejected")."""
    return [e["state"] for e in evs if e["topic"].rsplit(".", 1)[-1] == name]
