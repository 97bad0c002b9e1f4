"""Nine plain Python tools doing the jobs of the seed executors, for the baselines of the agent benchmark.

No sandbox, no signatures, no guards: what a few lines of a hand-written agent
would give a model. Paths starting with ``~`` are the fake home's. Messages
and schedules go to the home's ``.plain/`` folder, where the bench reads them.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx


def make_tools(home: Path) -> dict[str, Callable[..., Any]]:
    plain = home / ".plain"

    def where(path: str) -> Path:
        path = str(path)
        if path == "~" or path.startswith("~/"):
            return home / path[2:]
        return Path(path)

    def read_file(path: str) -> str:
        """Read a text file and return its content.

        Args:
            path: the file's path, e.g. ~/notes/todo.md
        """
        return where(path).read_text(encoding="utf-8", errors="replace")[:20000]

    def list_files(folder: str, pattern: str = "*", recursive: bool = True) -> list:
        """List the files under a folder whose name matches a glob pattern, with their size in bytes and modification time.

        Args:
            folder: the folder, e.g. ~/Documents
            pattern: a glob on the file name, e.g. *.pdf
            recursive: also look in sub-folders
        """
        base = where(folder)
        found = base.rglob("*") if recursive else base.glob("*")
        out = []
        for p in sorted(found):
            if p.is_file() and fnmatch.fnmatch(p.name, pattern):
                st = p.stat()
                out.append({"path": "~/" + str(p.relative_to(home)), "name": p.name, "size": st.st_size,
                            "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat(timespec="seconds")})
        return out[:200]

    def write_file(path: str, content: str, append: bool = False) -> str:
        """Write text to a file, creating its folder; append adds to the end instead of replacing.

        Args:
            path: the file's path
            content: the text to write
            append: add to the end of the file instead of replacing it
        """
        p = where(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        with p.open("a" if append else "w", encoding="utf-8") as f:
            f.write(content)
        return f"wrote {len(content)} characters to {path}"

    def move_file(source: str, destination: str) -> str:
        """Move or rename a file; a destination that is a folder (existing, or ending in /) receives the file.

        Args:
            source: the file to move
            destination: the new path, or a folder
        """
        src, dst = where(source), where(destination)
        if str(destination).endswith("/") or dst.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
            dst = dst / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(src), str(dst))
        return f"moved {source} to {dst}"

    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: the file to delete
        """
        where(path).unlink()
        return f"deleted {path}"

    def fetch_url(url: str) -> str:
        """Fetch a web page or API over HTTP and return its body as text.

        Args:
            url: the http(s) URL
        """
        r = httpx.get(url, timeout=15, follow_redirects=True, trust_env=False)
        return f"status {r.status_code}\n{r.text[:20000]}"

    def send_message(to: str, body: str) -> str:
        """Send a message to a person.

        Args:
            to: the recipient's name, e.g. lucia
            body: the text of the message
        """
        (plain / "outbox").mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns()}.json"
        (plain / "outbox" / name).write_text(json.dumps({"to_user": to, "body": body}))
        return f"sent to {to}"

    def schedule_message(cron: str, body: str, to: str = "me") -> str:
        """Schedule a message to be sent repeatedly, at the times of a five-field cron expression.

        Args:
            cron: minute hour day-of-month month day-of-week, e.g. '0 8 * * 1' for Mondays at 8
            body: the text of the message, or what to do
            to: the recipient, 'me' for the user
        """
        path = plain / "schedules.json"
        rows = json.loads(path.read_text()) if path.exists() else []
        rows.append({"cron": cron, "to": to, "body": body})
        plain.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rows))
        return f"scheduled '{cron}'"

    def get_time() -> str:
        """Return the current date and time (UTC) and the weekday."""
        now = datetime.now(timezone.utc)
        return f"{now.isoformat(timespec='seconds')} ({now.strftime('%A')})"

    return {f.__name__: f for f in (read_file, list_files, write_file, move_file, delete_file, fetch_url, send_message,
                                     schedule_message, get_time)}


def plain_outbox(home: Path) -> list[dict[str, Any]]:
    folder = home / ".plain" / "outbox"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def plain_schedules(home: Path) -> list[dict[str, Any]]:
    path = home / ".plain" / "schedules.json"
    return json.loads(path.read_text()) if path.exists() else []
