"""Bringing a workspace to life: folders, log, keys, seed executors, seed mnests."""

from __future__ import annotations

import os

from domain.mnest_weight import BOOTSTRAP_WEIGHT
from executors import SEED_DIR
from domain.errors import MetnosError
from metnos.mechanisms.executors.install import install_seed_executors
from metnos.mechanisms.executors.keys import ensure_keypair, key_fingerprint
from metnos.mechanisms.executors.signing import signed_in_current_format
from metnos.runtime.booted import Runtime
from metnos.services import wiring
from metnos.settings.workspace import Workspace
from projections.mnestome import select


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
    """Idempotent: a second run keeps the keys and the log, and adds what is missing."""
    report = []
    made = create_workspace(workspace)
    report.append(f"workspace: {workspace.data_dir} ({'created' if made else 'already there'})")
    report.append(f"config:    {workspace.config_dir}")
    signing_key = ensure_keypair(workspace)
    report.append(f"keys:      {workspace.keys_dir} (instance key {key_fingerprint(signing_key.verify_key)})")
    installed = install_seed_executors(workspace, signing_key) if not _seeds_installed(workspace) else []
    with wiring.boot(workspace) as runtime:
        active = sum(1 for e in runtime.report.loaded)
        quarantined = len(runtime.report.quarantined)
        report.append(f"executors: {active} active, {quarantined} quarantined" + (f" ({len(installed)} seeds signed)" if installed else ""))
        report.append(_mnestome_line(runtime))
        report.append(f"log:       {workspace.log_dir} ({runtime.log.recorder.max_notification_id() or 0} events)")
    return report


def _mnestome_line(runtime: Runtime) -> str:
    if runtime.seed_mnests_planted:
        return f"mnestome:  {runtime.seed_mnests_planted} seed mnests at weight {BOOTSTRAP_WEIGHT:.2f}"
    state = runtime.mnestome.state()
    live = sum(1 for _ in select(state))
    seeds = sum(1 for m in state["mnests"].values() if m["origin"] == "seed")
    return f"mnestome:  {live} live mnests ({seeds} seed mnests, planted at its first boot)"


def _seeds_installed(workspace: Workspace) -> bool:
    """Every shipped seed installed, and signed in the current format (an
    upgrade from format 1 re-signs them here)."""
    seed_dir = workspace.executors_origin_dir("seed")
    shipped = [p.name for p in SEED_DIR.iterdir() if (p / "manifest.toml").is_file()]
    for name in shipped:
        try:
            current = (seed_dir / name / "CURRENT").read_text().strip()
        except FileNotFoundError:
            return False
        if not signed_in_current_format(seed_dir / name / current):
            return False
    return True
