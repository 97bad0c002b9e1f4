"""The rows inside files that were read, for executors that work on entries.

read_files gives one entry per file (path, content, ...). An ``*_entries``
executor (compute, sort, filter, describe) wants the rows of a table, not the
file: "sum the amount column of X.csv" is read_files then compute_entries
over the CSV's rows. When a step's list is made of read files and it is piped
into such an executor, each file's content becomes its rows, by the file's
kind:

* ``.csv`` / ``.tsv``: one entry per row, keyed by the header; cells that
  read as numbers become numbers.
* ``.json``: a list of objects is the rows; an object holding exactly one
  list of objects gives that list; any other object is one row.
* ``.jsonl`` / ``.ndjson``: one object per non-blank line.
* any other text file: one entry per non-blank line,
  ``{"line": text, "number": n}`` (n counts from 1 over all lines). The model
  saw the file's text as ``content``: a ``field`` naming it names ``line``.

A file that does not parse as its kind says so (:class:`RecordsError`), so
the model reads why instead of getting the file entry back.
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from metnos.runtime.step.errors import TurnError

FILE_TEXT, LINE, LINES = "content", "line", "lines"
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


class RecordsError(TurnError):
    pass


def is_file_list(entries: Any) -> bool:
    """A list whose every item is a file that was read (has a path and text content)."""
    return (isinstance(entries, list) and bool(entries)
            and all(isinstance(e, Mapping) and isinstance(e.get("path"), str) and isinstance(e.get("content"), str)
                    for e in entries))


def kind_of(path: str) -> str:
    ext = posixpath.splitext(path)[1].lower()
    return {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}.get(ext, "lines")


def _cell(value: Any) -> Any:
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        number = float(value)
        return int(number) if number.is_integer() and re.match(r"^[+-]?\d+$", value.strip()) else number
    return value


def _table(path: str, content: str, delimiter: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(content), delimiter=delimiter)
    if not reader.fieldnames:
        raise RecordsError("empty_table", f"{path} has no header row", {"path": path})
    rows = []
    for row in reader:
        # A short row has None cells, a long one a None key: neither is data.
        rows.append({k.strip(): _cell(v) for k, v in row.items() if k is not None and v is not None})
    return rows


def _json(path: str, content: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(content)
    except ValueError as e:
        raise RecordsError("bad_json", f"{path} is not valid JSON: {e}", {"path": path}) from None
    if isinstance(data, list):
        return [d if isinstance(d, dict) else {"value": d} for d in data]
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list) and all(isinstance(x, dict) for x in v)]
        return list(lists[0]) if len(lists) == 1 else [data]
    return [{"value": data}]


def _json_lines(path: str, content: str) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(content.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as e:
            raise RecordsError("bad_json", f"{path} line {n} is not valid JSON: {e}", {"path": path, "line": n}) from None
        rows.append(data if isinstance(data, dict) else {"value": data})
    return rows


def _lines(content: str) -> list[dict[str, Any]]:
    return [{"line": line, "number": n} for n, line in enumerate(content.splitlines(), 1) if line.strip()]


def file_rows(files: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The rows of the read ``files``, and the kinds they were read as ("csv", "csv+lines")."""
    rows: list[dict[str, Any]] = []
    kinds: list[str] = []
    for f in files:
        path, content, kind = f["path"], f["content"], kind_of(f["path"])
        if kind in ("csv", "tsv"):
            rows.extend(_table(path, content, "," if kind == "csv" else "\t"))
        elif kind == "json":
            rows.extend(_json(path, content))
        elif kind == "jsonl":
            rows.extend(_json_lines(path, content))
        else:
            rows.extend(_lines(content))
        if kind not in kinds:
            kinds.append(kind)
    return rows, "+".join(kinds)
