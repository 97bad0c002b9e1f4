"""The catalogue and audit projections, live and rebuilt, on a real LMDB log."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from uuid import UUID

from domain.executor import Executor
from domain.invocation import Invocation
from metnos.mechanisms.eventlog import EventLog
from metnos.settings.workspace import Workspace
from projections.audit import AuditLines
from projections.base import MaterialisedView
from projections.catalog import CatalogueFold, invocable
from metnos.mechanisms.store.views import ViewStore

T = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)


def at(n: int) -> datetime:
    return T + timedelta(seconds=n)


def seed(log: EventLog, name: str, origin: str = "seed", start: int = 0) -> Executor:
    e = Executor.register(name=name, origin=origin, at=at(start))
    e.register_version(version="1.0.0", digest=f"blake3:{name}", summary=name, at=at(start + 1))
    e.record_signature(version="1.0.0", digest=f"blake3:{name}", key_id="k", at=at(start + 2))
    e.verify(version="1.0.0", digest=f"blake3:{name}", checks=[], at=at(start + 3))
    e.activate(version="1.0.0", at=at(start + 4))
    e.promote(version="1.0.0", by="loader", at=at(start + 5))
    log.save(e)
    return e


def test_catalogue_live_equals_rebuilt_byte_for_byte(metnos_home) -> None:
    ws = Workspace.from_env()
    log = EventLog(ws)
    store = ViewStore.open(ws.views_dir, "catalogue")
    view = MaterialisedView(CatalogueFold(), store)
    try:
        seed(log, "read_files")
        view.catch_up(log)
        seed(log, "find_files", start=10)
        # A synthesised executor with a seed's name never shadows the seed.
        shadow = seed(log, "read_files", origin="synt", start=20)
        view.catch_up(log)
        e = log.repository.get(shadow.id)
        e.quarantine(version="1.0.0", check="signature", file="manifest.sig", reason="manifest.sig does not verify", at=at(40))
        log.save(e)
        live = view.catch_up(log)
        live_bytes = view.state_bytes()

        assert live["executors"]["synt/read_files"]["versions"]["1.0.0"]["state"] == "quarantined"
        assert live["executors"]["synt/read_files"]["versions"]["1.0.0"]["reason"] == "manifest.sig does not verify"
        offered = invocable(live)
        assert sorted(offered) == ["find_files", "read_files"]
        assert offered["read_files"]["origin"] == "seed"

        rebuilt = view.rebuild(log)
        assert view.state_bytes() == live_bytes
        assert rebuilt == live
        assert view.position == log.recorder.max_notification_id()
    finally:
        store.close()
        log.close()


def test_a_changed_fold_version_is_rebuilt_by_itself(metnos_home) -> None:
    ws = Workspace.from_env()
    log = EventLog(ws)
    store = ViewStore.open(ws.views_dir, "catalogue")
    try:
        seed(log, "read_files")
        MaterialisedView(CatalogueFold(), store).catch_up(log)

        class NewerFold(CatalogueFold):
            version = 2

        newer = MaterialisedView(NewerFold(), store)
        assert newer.is_stale()
        state = newer.catch_up(log)
        assert "seed/read_files" in state["executors"]
        assert store.get_version("catalogue") == 2
    finally:
        store.close()
        log.close()


def invoke_events(log: EventLog, n: int, start: int) -> None:
    inv = Invocation.request(
        id=UUID(int=n), at=at(start), executor="read_files", version="1.0.0", origin="seed", digest="blake3:x",
        args={"paths": [f"~/n{n}.md"]}, args_hash="blake3:a", caller={"kind": "user"}, turn_id=None, trace_id=f"t{n}",
    )
    inv.complete(at=at(start + 1), ok=True, kind="ok", exit_code=0, duration_ms=18, output_hash="blake3:o", output_size=42,
                 output={"ok": True}, error=None, stderr_tail="")
    log.save(inv)


def test_audit_lines_are_daily_jsonl_and_rebuild_identically(metnos_home) -> None:
    ws = Workspace.from_env()
    log = EventLog(ws)
    store = ViewStore.open(ws.views_dir, "audit")
    audit = AuditLines(ws.audit_dir, store)
    try:
        invoke_events(log, 1, 0)
        assert audit.catch_up(log) == 1
        invoke_events(log, 2, 86400)  # the next day
        assert audit.catch_up(log) == 1
        assert audit.catch_up(log) == 0
        files = sorted(p.name for p in (ws.audit_dir / "executors").iterdir())
        assert files == ["2026-11-22.jsonl", "2026-11-23.jsonl"]
        first = (ws.audit_dir / "executors" / "2026-11-22.jsonl").read_bytes()
        assert b'"exit":"ok"' in first and b'"trace_id":"t1"' in first and b'"duration_ms":18' in first

        # A crash after appending but before recording the position.
        with open(ws.audit_dir / "executors" / "2026-11-23.jsonl", "ab") as f:
            f.write(b'{"half written')
        audit.catch_up(log)
        second = (ws.audit_dir / "executors" / "2026-11-23.jsonl").read_bytes()
        assert second.count(b"\n") == 1 and b"half written" not in second

        audit.rebuild(log)
        assert (ws.audit_dir / "executors" / "2026-11-22.jsonl").read_bytes() == first
        assert (ws.audit_dir / "executors" / "2026-11-23.jsonl").read_bytes() == second
    finally:
        store.close()
        log.close()
