"""Issue 3 end to end: init signs the seeds, the loader guards them, the lifecycle is in the log."""

from __future__ import annotations

import stat
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.support.hostile import FORK_AND_HOLD




def cli_json(capsys: pytest.CaptureFixture, *argv: str) -> object:
    capsys.readouterr()
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, orjson.loads(out)


def events(capsys: pytest.CaptureFixture, topic: str) -> list[dict]:
    capsys.readouterr()
    main(["events", "--json", "--topic", topic])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def seed_dir(name: str) -> Path:
    ws = Workspace.from_env()
    return ws.executors_origin_dir("seed") / name / "1.0.0"


def test_init_makes_keys_private_and_signs_every_seed_into_the_log(home: Path, capsys) -> None:
    ws = Workspace.from_env()
    key = ws.keys_dir / "instance.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(ws.keys_dir.stat().st_mode) == 0o700
    code, rows = cli_json(capsys, "executors", "list")
    assert code == 0
    names = {r["name"] for r in rows}
    assert len(names) >= 13 and {"read_files", "write_files", "get_now", "send_messages"} <= names
    assert all(r["state"] == "active" and r["current"] for r in rows)
    activated = events(capsys, "ExecutorActivated")
    assert len(activated) == len(rows)
    # The private key never reaches the log.
    secret = key.read_bytes()
    log_bytes = b"".join(p.read_bytes() for p in ws.log_dir.iterdir())
    assert secret not in log_bytes


def test_a_second_boot_with_nothing_new_appends_nothing(home: Path, capsys) -> None:
    before = len(events(capsys, ""))
    assert main(["init"]) == 0
    assert main(["executors", "list"]) == 0
    assert len(events(capsys, "")) == before


def test_a_tampered_executor_is_quarantined_with_its_reason_and_never_run(home: Path, capsys) -> None:
    (home / "diary.md").write_text("one\ntwo\n")
    main_py = seed_dir("read_files") / "main.py"
    main_py.write_bytes(main_py.read_bytes() + b"\n# tampered\n")
    code, rows = cli_json(capsys, "executors", "list")
    row = next(r for r in rows if r["name"] == "read_files")
    assert row["state"] == "quarantined"
    assert "main.py" in row["reason"] and "digest" in row["reason"]
    quarantined = events(capsys, "ExecutorQuarantined")
    assert [e["state"]["version"] for e in quarantined] == ["1.0.0"]

    capsys.readouterr()
    assert main(["executors", "run", "read_files", '{"paths": ["~/diary.md"]}']) == 1
    out = orjson.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["error"]["kind"] == "Quarantined"
    refused = events(capsys, "InvocationRefused")
    assert refused[-1]["state"]["kind"] == "Quarantined"
    assert not events(capsys, "InvocationCompleted")

    # Rehabilitation checks the files: refused while they are still bad...
    assert main(["executors", "rehabilitate", "read_files"]) == 2
    # ...and accepted once the change is signed by the instance key.
    assert main(["executors", "sign", str(seed_dir("read_files"))]) == 0
    assert main(["executors", "rehabilitate", "read_files"]) == 0
    assert main(["executors", "run", "read_files", '{"paths": ["~/diary.md"]}']) == 0


def test_tampering_after_boot_is_caught_at_call_time(home: Path) -> None:
    from metnos.runtime.booted import Runtime

    (home / "n.md").write_text("x")
    with Runtime.boot(birth=False) as rt:
        schema = seed_dir("read_files") / "schema.json"
        schema.write_bytes(schema.read_bytes().replace(b"Read", b"Rxad", 1) if b"Read" in schema.read_bytes() else schema.read_bytes() + b" ")
        call = rt.call("read_files", {"paths": ["~/n.md"]}, caller={"kind": "test"})
        assert call.refusal is not None and call.refusal.kind == "Quarantined"
        assert "schema.json" in call.refusal.message
        state = rt.catalogue_state()["executors"]["seed/read_files"]["versions"]["1.0.0"]
        assert state["state"] == "quarantined"


def test_run_goes_through_policy_sandbox_and_events(home: Path, capsys) -> None:
    (home / "notes.md").write_text("alpha\nbeta\n")
    capsys.readouterr()
    assert main(["executors", "run", "read_files", '{"paths": ["~/notes.md"]}']) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["entries"][0]["content"] == "alpha\nbeta\n"
    assert main(["executors", "run", "read_files", '{"paths": ["~/.ssh/id_ed25519"]}']) == 1
    assert main(["executors", "run", "read_files", '{"paths": 7}']) == 1
    assert main(["executors", "run", "read_files", "not json"]) == 2
    assert main(["executors", "run", "no_such_thing", "{}"]) == 1
    requested = events(capsys, "InvocationRequested")
    assert [e["state"]["executor"] for e in requested] == ["read_files", "read_files", "read_files", "no_such_thing"]
    assert requested[0]["state"]["digest"].startswith("blake3:")
    kinds = [e["state"]["kind"] for e in events(capsys, "InvocationRefused")]
    assert kinds == ["PolicyViolation", "SchemaViolation", "UnknownExecutor"]
    audit = Workspace.from_env().audit_dir / "executors"
    lines = [orjson.loads(l) for p in sorted(audit.iterdir()) for l in p.read_bytes().splitlines()]
    assert [l["exit"] for l in lines] == ["ok", "PolicyViolation", "SchemaViolation", "UnknownExecutor"]
    assert lines[0]["output"]["size"] > 0


def test_promote_quarantine_archive_and_rehabilitate(home: Path, capsys) -> None:
    assert main(["executors", "quarantine", "get_now", "--reason", "suspicious"]) == 0
    code, rows = cli_json(capsys, "executors", "list")
    assert next(r for r in rows if r["name"] == "get_now")["reason"] == "suspicious"
    assert main(["executors", "run", "get_now", "{}"]) == 1
    assert main(["executors", "archive", "get_now"]) == 0
    archived = Workspace.from_env().executors_origin_dir("seed") / ".archive" / "get_now" / "1.0.0"
    assert archived.is_dir()
    assert main(["executors", "rehabilitate", "get_now"]) == 0
    assert (seed_dir("get_now") / "main.py").is_file()
    assert main(["executors", "run", "get_now", "{}"]) == 0
    assert main(["executors", "promote", "get_now", "9.9.9"]) == 2


def test_show_and_verify(home: Path, capsys) -> None:
    code, shown = cli_json(capsys, "executors", "show", "write_files")
    assert code == 0
    details = shown["details"]["1.0.0"]
    assert details["side_effects"] is True and details["profile_lock"].startswith("blake3:")
    code, verified = cli_json(capsys, "executors", "verify")
    assert code == 0 and len(verified["verified"]) >= 13 and verified["quarantined"] == []
    (seed_dir("sort_entries") / "profile.lock").write_text("blake3:" + "0" * 64 + "\n")
    code, verified = cli_json(capsys, "executors", "verify")
    assert code == 1
    assert verified["quarantined"][0]["name"] == "sort_entries"
    assert verified["quarantined"][0]["file"] == "profile.lock"
    assert main(["executors", "show", "nope"]) == 2


def test_executors_granted_the_home_run_in_this_layout(home: Path, capsys) -> None:
    """The issue's check: in the default layout Metnos's own config sits inside ~;
    an executor granted ~ must still start, read, write, and see no secret."""
    (home / "notes.md").write_text("first\nsecond\n")
    capsys.readouterr()
    assert main(["executors", "run", "read_files", '{"paths": ["~/notes.md"]}']) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["entries"][0]["content"] == "first\nsecond\n"

    assert main(["executors", "run", "write_files", '{"files": [{"path": "~/new.txt", "content": "written"}]}']) == 0, capsys.readouterr()
    assert (home / "new.txt").read_text() == "written"

    keys = Workspace.from_env().keys_dir / "instance.key"
    assert keys.exists()
    capsys.readouterr()
    main(["executors", "run", "read_files", orjson.dumps({"paths": [str(keys)]}).decode()])
    out = orjson.loads(capsys.readouterr().out)
    assert keys.read_bytes().hex() not in orjson.dumps(out).decode()
    assert out["ok"] is False or all(e.get("content") in (None, "") for e in out.get("entries", []))


HOG = FORK_AND_HOLD + """
def run(args, ctx):
    if args["word"] != "hog":
        return {"ok": True, "content": args["word"]}
    return {"ok": True, "content": "held %d MB" % fork_and_hold(12, 120)}
"""


def test_an_invocation_past_its_memory_cap_is_recorded_as_memory_exceeded(home: Path, capsys) -> None:
    from metnos.mechanisms.executors.keys import load_signing_key
    from metnos.mechanisms.executors.signing import sign_executor
    from tests.unit.executor_kit import write_executor

    ws = Workspace.from_env()
    d = write_executor(ws.executors_origin_dir("skill") / "compute_hog" / "1.0.0", name="compute_hog",
                       created_by="skill:tests", main=HOG)
    manifest = d / "manifest.toml"
    manifest.write_text(manifest.read_text().replace(
        "max_duration_s = 2", "max_duration_s = 30\nmax_memory_mb = 256\nmax_pids = 32"))
    sign_executor(d, load_signing_key(ws))
    # Installed the way a user installs a skill: found, checked and born at
    # boot, then made current.
    assert main(["executors", "promote", "compute_hog", "1.0.0"]) == 0
    capsys.readouterr()
    assert main(["executors", "run", "compute_hog", '{"word": "hog"}']) == 1
    out = orjson.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["error"]["kind"] == "MemoryExceeded", out
    completed = events(capsys, "InvocationCompleted")[-1]["state"]
    assert completed["kind"] == "MemoryExceeded" and completed["ok"] is False
    assert completed["error"]["limit_mb"] == 256
    assert completed["error"]["enforced_by"] in ("cgroup-v2", "cgroup-v1", "watchdog")


def test_a_below_threshold_executor_is_served_with_its_state_and_archived_by_the_user(home: Path, capsys) -> None:
    """seeds/000 ch. 6: an executor unused past the threshold is shown so by the daemon (API and
    dashboard), still offered, and the user retires it with `metnos executors archive`."""
    from datetime import datetime, timedelta, timezone

    from starlette.testclient import TestClient

    from domain.executor import executor_id

    from metnos.adapters.daemon.app import build_app
    from metnos.runtime.booted import Runtime
    from metnos.runtime.jobs import CallbackContext
    from metnos.runtime.scheduler.ager import run_executor_ager
    from metnos.runtime.scheduler.clock import ManualClock
    from metnos.services.host import DaemonHost
    from projections.catalog import invocable

    token = "a-daemon-token-for-this-test-only-0123456789"
    clock = ManualClock(datetime.now(timezone.utc) + timedelta(days=40))
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        aged = run_executor_ager(CallbackContext(runtime=rt, now=clock(), schedule_id="test"), {"idle_days": 30, "include_seeds": True})
        assert aged.ok, aged.error
        rt.log.save(*aged.aggregates)
        rt.refresh()
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(build_app(DaemonHost(rt, env={}), token, mounts=[])) as client:
            rows = client.get("/api/executors", headers=headers).json()
            page = client.get("/executors", headers={**headers, "Accept": "text/html"}).text
        [row] = [r for r in rows if r["name"] == "get_now"]
        assert (row["state"], row["current"]) == ("below_threshold", True)
        assert "`metnos executors archive get_now` retires it" in row["reason"]
        assert '<span class="badge below_threshold">below_threshold</span>' in page
        assert "get_now" in invocable(rt.catalogue.catch_up(rt.log))
    assert main(["executors", "archive", "get_now"]) == 0
    [archived] = [e for e in events(capsys, "ExecutorArchived") if e["aggregate_id"] == str(executor_id("seed", "get_now"))]
    assert archived["state"]["version"] == "1.0.0" and archived["state"]["by"] == "user"
    code, rows = cli_json(capsys, "executors", "list")
    assert next(r for r in rows if r["name"] == "get_now")["state"] == "archived"
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        assert "get_now" not in invocable(rt.catalogue.catch_up(rt.log))
    assert main(["executors", "run", "get_now", "{}"]) == 1
    assert (Workspace.from_env().executors_origin_dir("seed") / ".archive" / "get_now" / "1.0.0").is_dir()
