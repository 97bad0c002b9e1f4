"""The paths and URLs a request names, by rules (issue 17, items 3 and 4)."""

from __future__ import annotations

from metnos.runtime.step.intent import named_targets
from metnos.runtime.turn.remediation import RemediationContext, plan_remediation

CATALOGUE = frozenset({"read_files", "find_files", "get_urls", "compute_entries"})


def test_files_folders_and_urls() -> None:
    t = named_targets("copy ~/a/b.csv and /srv/x/ to ~/out, then fetch https://example.org/p.html.")
    assert t.files == ("~/a/b.csv",) and t.folders == ("/srv/x", "~/out") and t.urls == ("https://example.org/p.html",)
    assert named_targets("version 2.5 of the plan, no path").to_json() == {"files": [], "folders": [], "urls": []}


def remedy(text: str) -> tuple[str | None, dict]:
    action = plan_remediation(RemediationContext(error_class="needs_data_source", executor="compute_entries",
                                                 args={"op": "sum"}, request_text=text, catalogue=CATALOGUE))
    return action.prereq_tool, dict(action.prereq_args)


def test_the_data_source_is_what_the_request_names() -> None:
    assert remedy("sum the amount column of ~/r/g.csv") == ("read_files", {"paths": ["~/r/g.csv"]})
    assert remedy("how many files are in ~/docs") == ("find_files", {"base_path": "~/docs"})
    assert remedy("count the links on https://example.org") == ("get_urls", {"urls": ["https://example.org"]})
    assert remedy("sum them")[0] is None
