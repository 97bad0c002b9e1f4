"""Before-images and after-states of the paths an invocation may change (DESIGN decision 6).

The paths are the arguments the executor's signed schema marks as written
(``"format": "path"``, ``"x-access": "write"``), resolved by the same policy
check that runs before the spawn, so the image is of the very file the
executor will touch. Each path is kept whole (a folder with everything in
it) or not at all: a path above the caps, or one that cannot be read, is
recorded with the reason, and undo lists it as what it cannot restore.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metnos.mechanisms.blobs import BlobStore
from metnos.mechanisms.executors.loader import LoadedExecutor
from metnos.mechanisms.filestate import Limits, NotCapturable, first_missing, take
from metnos.mechanisms.failures import InvocationError
from metnos.mechanisms.sandbox.policy import scope_for, write_paths
from metnos.settings.workspace import Workspace


def _outermost(found: Mapping[str, Path]) -> dict[Path, list[str]]:
    """Path -> the argument pointers naming it; a path inside another one is kept with it."""
    by_path: dict[Path, list[str]] = {}
    for pointer, path in found.items():
        by_path.setdefault(path, []).append(pointer)
    kept: dict[Path, list[str]] = {}
    for path in sorted(by_path, key=lambda p: len(p.parts)):
        outer = next((k for k in kept if k in path.parents), None)
        if outer is not None:
            kept[outer].extend(by_path[path])
        else:
            kept[path] = list(by_path[path])
    return kept


class FileCapture:
    def __init__(
        self,
        *,
        workspace: Workspace,
        blobs: BlobStore,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.workspace = workspace
        self.blobs = blobs
        self.env = env
        self.limits = limits or Limits()

    def targets(self, executor: LoadedExecutor, args: Mapping[str, Any]) -> dict[Path, list[str]]:
        """The paths the executor may write; none when the policy refuses (the spawn will be refused too)."""
        env = os.environ if self.env is None else self.env
        try:
            scope = scope_for(executor.profile, workspace=self.workspace, env=env)
            return _outermost(write_paths(args, executor.input_schema, scope))
        except InvocationError:
            return {}

    def before(self, executor: LoadedExecutor, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        records = []
        for path, pointers in self.targets(executor, args).items():
            record: dict[str, Any] = {"path": str(path), "pointers": pointers}
            try:
                record["node"] = take(path, blobs=self.blobs, limits=self.limits)
            except (NotCapturable, OSError) as e:
                record["refused"] = e.reason if isinstance(e, NotCapturable) else f"{path}: {e.strerror}"
            else:
                created = first_missing(path)
                if created is not None:
                    record["created_from"] = str(created)
                # The folder whose entries the change touches: its time moves with them, and undo puts it back.
                folder = (created or path).parent
                try:
                    record["parent"] = {"path": str(folder), "mtime": os.lstat(folder).st_mtime_ns}
                except OSError:
                    pass
            records.append(record)
        return records

    def after(self, before: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The same paths once the executor is done: hashes only, no bytes kept."""
        records = []
        for b in before:
            if "refused" in b:
                continue
            path = Path(b["path"])
            record: dict[str, Any] = {"path": b["path"]}
            try:
                record["node"] = take(path, limits=self.limits)
            except (NotCapturable, OSError) as e:
                record["refused"] = e.reason if isinstance(e, NotCapturable) else f"{path}: {e.strerror}"
            records.append(record)
        return records
