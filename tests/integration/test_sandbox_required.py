"""Issue 16 item 2: never unsandboxed by accident.

"bwrap missing" is real here: PATH points at a folder without bwrap, or at
one whose bwrap is a script that fails as a broken installation does (no
user namespaces). The probe is cached per process, so each test clears it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import orjson
import pytest
from nacl.signing import SigningKey

from metnos.adapters.cli import main
from metnos.mechanisms.executors.install import install_executor
from metnos.mechanisms.executors.loader import load_executors
from metnos.mechanisms.failures import SandboxUnavailable
from metnos.mechanisms.invocation.birth import make_sandboxed_spawn
from metnos.mechanisms.invocation.runner import invoke
from metnos.runtime.booted import Runtime
from metnos.mechanisms.sandbox.bwrap import probe
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.settings.workspace import Workspace
from tests.support.sandbox_env import make_env, needs_bwrap
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.unit.executor_kit import write_executor

BROKEN_BWRAP = """#!/bin/sh
[ "$1" = --version ] && echo 'bubblewrap 0.8.0' && exit 0
echo 'bwrap: setting up uid map: Permission denied' >&2
exit 1
"""


def _path_without_bwrap(tmp_path: Path, kind: str) -> Path:
    bin_dir = tmp_path / f"bin-{kind}"
    bin_dir.mkdir()
    if kind == "broken":
        fake = bin_dir / "bwrap"
        fake.write_text(BROKEN_BWRAP)
        fake.chmod(0o755)
    return bin_dir


@pytest.fixture(params=["missing", "broken"])
def no_bwrap(request, tmp_path, monkeypatch):
    """PATH with no working bwrap; yields what the probe must report."""
    monkeypatch.setenv("PATH", str(_path_without_bwrap(tmp_path, request.param)))
    monkeypatch.delenv("METNOS_SANDBOX", raising=False)
    probe.cache_clear()
    yield "bwrap not found in PATH" if request.param == "missing" else "setting up uid map"
    probe.cache_clear()


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _events(capsys, topic: str) -> list[dict]:
    _, out, _ = _cli(capsys, "events", "--json", "--topic", topic)
    return [orjson.loads(line) for line in out.splitlines()]


def _assert_says_how_to_fix(text: str) -> None:
    assert "apt install bubblewrap" in text and "METNOS_SANDBOX=off" in text
    assert "Traceback" not in text


MARKER_MAIN = """
def run(args, ctx):
    open(args["marker"], "w").write("ran")
    return {"ok": True}
"""


def test_invoke_is_refused_and_the_executor_never_runs(tmp_path, no_bwrap):
    sx = make_env(tmp_path)
    code = sx.executor("marker", MARKER_MAIN)
    marker = tmp_path / "ran"
    out = invoke(code, SandboxProfile(), {"marker": str(marker)}, workspace=sx.workspace, env=sx.env)
    assert not out.ok and out.kind == "SandboxUnavailable"
    assert out.sandbox_mode == "unavailable" and out.exit_code is None
    assert no_bwrap in out.error["reason"]
    _assert_says_how_to_fix(out.error["fix"])
    assert not marker.exists()


def test_the_explicit_opt_out_still_runs_without_bwrap(tmp_path, no_bwrap):
    sx = make_env(tmp_path, METNOS_SANDBOX="off")
    code = sx.executor("marker", MARKER_MAIN)
    marker = tmp_path / "ran"
    out = invoke(code, SandboxProfile(), {"marker": str(marker)}, workspace=sx.workspace, env=sx.env)
    assert out.ok, out
    assert out.sandbox_mode == "off" and "bwrap" not in out.layers
    assert marker.read_text() == "ran"


def _marker_executor(tmp_path: Path, marker: Path) -> Path:
    return write_executor(tmp_path / "src" / "get_marker", name="get_marker", created_by="skill:test", birth=textwrap.dedent(f"""\
        def birth_marks(run, tmp):
            open({str(marker)!r}, "w").write("birth ran")
            assert run({{"word": "x"}})["content"] == "x"
        """))


def test_births_are_refused_before_any_runs_and_nothing_is_quarantined(metnos_home, tmp_path, no_bwrap):
    ws = Workspace.from_env()
    key = SigningKey.generate()
    marker = tmp_path / "birth-ran"
    install_executor(_marker_executor(tmp_path, marker), ws.executors_origin_dir("skill"), key)
    with pytest.raises(SandboxUnavailable) as exc:
        load_executors(ws, key.verify_key, birth=True, reserved_names=(), spawn=make_sandboxed_spawn(ws))
    assert no_bwrap in exc.value.reason
    _assert_says_how_to_fix(str(exc.value))
    assert not marker.exists()
    # Births never fall back to a spawn nobody chose.
    with pytest.raises(ValueError, match="need a spawn"):
        load_executors(ws, key.verify_key, birth=True, reserved_names=())
    assert not marker.exists()
    # Verification alone still works: it runs nothing.
    report = load_executors(ws, key.verify_key, birth=False, reserved_names=())
    assert [e.name for e in report.loaded] == ["get_marker"] and not report.quarantined


def test_the_cli_refuses_executors_run_ask_and_init_with_how_to_fix_it(home, capsys, monkeypatch, tmp_path, no_bwrap):
    (home / "notes.md").write_text("hello")
    before = len(_events(capsys, ""))
    code, out, err = _cli(capsys, "executors", "run", "read_files", '{"paths": ["~/notes.md"]}')
    assert code == 2 and out == ""
    assert no_bwrap in err
    _assert_says_how_to_fix(err)
    with ScriptedLLM([call("read_files", {"paths": ["~/notes.md"]}), text("hello")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        code, out, err = _cli(capsys, "ask", "read ~/notes.md")
        assert code == 2 and llm.requests == []
    _assert_says_how_to_fix(err)
    code, out, err = _cli(capsys, "init")
    assert code == 2
    _assert_says_how_to_fix(err)
    # Refused before anything happened: no executor was quarantined for it.
    assert not _events(capsys, "ExecutorQuarantined")
    assert len(_events(capsys, "")) == before
    code, out, _ = _cli(capsys, "sandbox", "status")
    assert code == 1
    assert "UNAVAILABLE" in out and "invocations, birth tests and turns are refused" in out
    _assert_says_how_to_fix(out)


def test_a_call_outside_a_turn_is_refused_and_recorded_with_its_reason(home, capsys, no_bwrap):
    (home / "notes.md").write_text("hello")
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        result = rt.call("read_files", {"paths": ["~/notes.md"]}, caller={"kind": "test"})
    assert not result.ok and result.outcome is None
    obs = result.observation()
    assert obs["error"]["kind"] == "SandboxUnavailable" and no_bwrap in obs["error"]["reason"]
    (refused,) = _events(capsys, "InvocationRefused")
    state = refused["state"]
    assert state["kind"] == "SandboxUnavailable" and state["sandbox"] == "unavailable"
    assert no_bwrap in state["error"]["reason"]
    _assert_says_how_to_fix(state["error"]["fix"])
    assert not _events(capsys, "InvocationCompleted")


def test_the_opt_out_is_recorded_on_every_invocation_and_ask_warns_each_time(home, capsys, monkeypatch):
    (home / "notes.md").write_text("hello")
    monkeypatch.setenv("METNOS_SANDBOX", "off")
    code, out, err = _cli(capsys, "executors", "run", "read_files", '{"paths": ["~/notes.md"]}')
    assert code == 0, err
    assert "METNOS_SANDBOX=off" in err
    script = [call("read_files", {"paths": ["~/notes.md"]}), text("it says hello")]
    for _ in range(2):
        with ScriptedLLM(script) as llm:
            monkeypatch.setenv("METNOS_LLM_URL", llm.url)
            code, out, err = _cli(capsys, "ask", "what does ~/notes.md say?")
        assert code == 0, err
        assert out.strip() == "it says hello"
        assert "warning: METNOS_SANDBOX=off" in err
    completed = _events(capsys, "InvocationCompleted")
    assert len(completed) == 3
    assert [e["state"]["sandbox"] for e in completed] == ["off", "off", "off"]


@needs_bwrap
def test_with_the_sandbox_on_invocations_record_bwrap_and_ask_does_not_warn(home, capsys, monkeypatch):
    (home / "notes.md").write_text("hello")
    with ScriptedLLM([call("read_files", {"paths": ["~/notes.md"]}), text("it says hello")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        code, out, err = _cli(capsys, "ask", "what does ~/notes.md say?")
    assert code == 0, err
    assert "METNOS_SANDBOX" not in err
    (completed,) = _events(capsys, "InvocationCompleted")
    assert completed["state"]["sandbox"] == "bwrap"


@pytest.mark.parametrize("value", ["maybe", "disabled"])
def test_an_unknown_setting_refuses_everything_and_names_the_variable(home, capsys, monkeypatch, value):
    (home / "notes.md").write_text("hello")
    monkeypatch.setenv("METNOS_SANDBOX", value)
    for argv in (["executors", "run", "read_files", '{"paths": ["~/notes.md"]}'], ["ask", "hello"]):
        code, out, err = _cli(capsys, *argv)
        assert code == 2, argv
        assert f"METNOS_SANDBOX={value!r}" in err and "on" in err and "off" in err
        assert "Traceback" not in err
    code, out, _ = _cli(capsys, "sandbox", "status")
    assert code == 1 and "UNAVAILABLE" in out and "METNOS_SANDBOX" in out
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        result = rt.call("read_files", {"paths": ["~/notes.md"]}, caller={"kind": "test"})
    assert result.observation()["error"]["kind"] == "SandboxUnavailable"


def test_a_turn_does_not_start_without_the_sandbox(home, no_bwrap):
    from metnos.runtime.turn.session import run_turn

    with ScriptedLLM([text("never asked")]) as llm, Runtime.boot(Workspace.from_env(), birth=False) as rt:
        with pytest.raises(SandboxUnavailable) as exc:
            run_turn(rt, "hello", approver=lambda *a: (False, "test"), env={"METNOS_LLM_URL": llm.url, "PATH": ""})
        assert llm.requests == []
    assert no_bwrap in exc.value.reason
