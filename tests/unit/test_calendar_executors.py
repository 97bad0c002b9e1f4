"""The calendar executors share one module, copied into each signed folder: the copies must not drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from metnos.settings.calendar import DavSource, DavSources, secret_names

EXECUTORS = Path(__file__).resolve().parents[2] / "executors"


@pytest.mark.parametrize("name", ["set_events", "delete_events"])
def test_each_copy_of_calendars_py_is_read_events_own(name: str) -> None:
    assert (EXECUTORS / name / "calendars.py").read_bytes() == (EXECUTORS / "read_events" / "calendars.py").read_bytes()


def test_a_password_in_config_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="metnos calendar password"):
        DavSource(url="http://127.0.0.1:1/c/", password="x")


def test_a_source_is_a_url_or_a_path() -> None:
    with pytest.raises(ValueError, match="either url"):
        DavSource()
    with pytest.raises(ValueError, match="either url"):
        DavSource(url="http://h/c/", path="~/c.ics")


def test_only_server_sources_have_secrets_and_the_only_source_is_the_default() -> None:
    calendar = DavSources(sources={"home": DavSource(url="http://h/c/", username="a", secret="dav"),
                                   "hol": DavSource(path="~/h.ics")})
    contacts = DavSources(sources={"people": DavSource(url="http://h/a/", username="a")})
    assert secret_names(calendar, contacts) == {"calendar.home": "dav", "contacts.people": "people"}
    assert contacts.executor_config()["default"] == "people" and calendar.executor_config()["default"] == ""
    assert "password" not in str(calendar.executor_config())
