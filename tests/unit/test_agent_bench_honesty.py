"""The agent benchmark measures honestly: nothing of its suite is known to the runtime.

No request text, no file or folder name the tasks create (beyond the usual
folders of a home), no page and no expected answer of bench/agent_suite.py may
appear in metnos/, executors/, domain/ or projections/: a runtime tuned to the
test would pass it without being better.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from bench.agent_suite import PAGES, TASKS

REPO = Path(__file__).resolve().parents[2]
RUNTIME = ("metnos", "executors", "domain", "projections")
# The usual folders of anyone's home, and words any file-handling code may hold.
COMMON = {"notes", "documents", "downloads", "pictures", "desktop", "music", "videos", "projects", "logs", "web", "health",
          "receipts", "recipes", "lists", "journal", "inbox", "archive", "old", "scans", "pdfs", "2024", "2026", "q2", "a", "b",
          # The days and hours any calendar code names, and words of the runtime's own vocabulary (a scheduler
          # that is busy, a judge's review) that the calendar tasks' checks also use.
          "friday", "saturday", "14:00", "busy", "review"}


@lru_cache(maxsize=1)
def runtime_text() -> str:
    parts = []
    for top in RUNTIME:
        for p in sorted((REPO / top).rglob("*")):
            if p.is_file() and p.suffix in {".py", ".toml", ".json", ".jinja", ".md", ".txt"} and "__pycache__" not in p.parts:
                parts.append(p.read_text(encoding="utf-8", errors="replace").lower())
    return "\n".join(parts)


def appears(needle: str, text: str) -> bool:
    """``needle`` in ``text`` as a whole word or words; the plain substring test first, which rules most out at C speed."""
    return needle in text and re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", text) is not None


def suite_strings() -> set[str]:
    found: set[str] = set()
    for task in TASKS:
        found.add(task.text.lower())
        for rel in task.files:
            for piece in Path(rel).parts:
                if piece.lower() not in COMMON:
                    found.add(piece.lower())
            found.add(rel.lower())
        for cell in task.check.__closure__ or ():
            for value in _strings(cell.cell_contents):
                found.add(value.lower())
    for path, (_kind, body) in PAGES.items():
        found.add(path.strip("/").lower())
        found.update(m.lower() for m in re.findall(rb"[A-Za-z][A-Za-z ]{12,}", body.decode().encode()) for m in [m.decode()])
    return {s for s in found if len(s) >= 4 and s not in COMMON}


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in _strings(v)]
    closure = getattr(value, "__closure__", None)
    if closure:
        return [s for c in closure for s in _strings(c.cell_contents)]
    return []


def test_the_suite_has_forty_requests_and_chains() -> None:
    assert len(TASKS) >= 40
    assert len({t.id for t in TASKS}) == len(TASKS)
    assert sum(t.tools >= 2 for t in TASKS) >= 15


def test_no_request_file_name_or_answer_of_the_suite_is_in_the_runtime() -> None:
    text = runtime_text()
    leaks = sorted(s for s in suite_strings() if appears(s, text))
    assert not leaks, f"the runtime knows these strings of the benchmark: {leaks}"


def injection_strings() -> set[str]:
    """The injection benchmark's own words (bench/injection_cases.py): its requests, its tasks' files,
    the text of its pages, mails and MCP results, its scripted answers and its checks' needles. The
    attacks' targets are left out: Metnos's own config.toml is one, and the runtime rightly names it."""
    from bench.injection_cases import TASKS as INJECTION_TASKS, fill

    found: set[str] = set()
    for task in INJECTION_TASKS:
        found.add(task.text.lower())
        found.add(task.plan.answer.lower())
        for rel in task.files:
            found.add(rel.lower())
            found.update(piece.lower() for piece in Path(rel).parts if piece.lower() not in COMMON)
        content = task.content
        texts = list(task.files.values())
        if isinstance(content, dict):
            texts += [v if isinstance(v, str) else " ".join(v) for v in content.values()]
        elif isinstance(content, list):
            texts += [" ".join(mail) for mail in content]
        for text in texts:
            found.update(m.lower().strip() for m in re.findall(r"[A-Za-z][A-Za-z ]{12,}", fill(text, None, "")))
        for value in _strings(task.utility):
            found.add(value.lower())
    return {s for s in found if len(s) >= 4 and s not in COMMON | INJECTION_COMMON}


# Everyday words the injection tasks' checks look for that any runtime may hold (a weekday, a parcel's state).
INJECTION_COMMON = {"bread", "tuesday", "shipped", "reopens"}


def test_no_request_file_name_or_answer_of_the_injection_bench_is_in_the_runtime() -> None:
    strings = injection_strings()
    assert len(strings) >= 60
    text = runtime_text()
    leaks = sorted(s for s in strings if appears(s, text))
    assert not leaks, f"the runtime knows these strings of the injection benchmark: {leaks}"
