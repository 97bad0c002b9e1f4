"""Bringing a workspace to life: folders, log, keys, seed executors."""

from __future__ import annotations

import os

from metnos.errors import MetnosError
from metnos.eventlog import EventLog
from metnos.workspace import Workspace


def create_workspace(workspace: Workspace) -> list[str]:
    """Make every folder with the right modes; returns what was created."""
    made = []
    plan = [
        (workspace.data_dir, 0o700),
        (workspace.log_dir, 0o700),
        (workspace.views_dir, 0o700),
        (workspace.audit_dir, 0o700),
        (workspace.blobs_dir, 0o700),
        (workspace.outbox_dir, 0o700),
        (workspace.executors_dir, 0o700),
        (workspace.config_dir, 0o700),
        (workspace.keys_dir, 0o700),
    ]
    for path, mode in plan:
        try:
            if not path.exists():
                path.mkdir(parents=True, mode=mode)
                made.append(str(path))
            os.chmod(path, mode)
        except PermissionError:
            msg = f"cannot create {path}: permission denied; set METNOS_HOME to a folder you can write"
            raise MetnosError(msg) from None
        except OSError as e:
            msg = f"cannot create {path}: {e.strerror}; set METNOS_HOME to a folder you can write"
            raise MetnosError(msg) from None
    return made


def initialise(workspace: Workspace) -> list[str]:
    report = []
    made = create_workspace(workspace)
    report.append(f"workspace: {workspace.data_dir} ({'created' if made else 'already there'})")
    report.append(f"config:    {workspace.config_dir}")
    log = EventLog(workspace)
    try:
        report.append(f"log:       {workspace.log_dir} ({log.recorder.max_notification_id() or 0} events)")
    finally:
        log.close()
    return report
