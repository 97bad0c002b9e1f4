from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from metnos.mechanisms.invocation.runner import invoke
from metnos.mechanisms.sandbox.profile import SandboxProfile
from tests.support.sandbox_env import make_env

SCHEMA_IN = {"type": "object", "required": ["path"], "additionalProperties": False,
             "properties": {"path": {"type": "string", "format": "path"}}}
SCHEMA_OUT = {"type": "object", "required": ["lines"], "properties": {"lines": {"type": "array", "items": {"type": "string"}}}}

READ_TAIL = """
def run(args, ctx):
    with open(args["path"]) as f:
        lines = f.read().splitlines()
    print("debug output goes to stderr, not the result")
    return {"lines": lines[-ctx.get("n", 3):]}
"""


@pytest.fixture(params=["bwrap", "off"])
def sx(request, tmp_path, layout):
    s = make_env(tmp_path, layout)
    if request.param == "off":
        s.env["METNOS_SANDBOX"] = "0"
    else:
        from metnos.mechanisms.sandbox.bwrap import probe
        if not probe().works:
            pytest.skip(f"bubblewrap cannot run: {probe().error}")
    notes = s.home / "notes"
    notes.mkdir()
    (notes / "diary.md").write_text("one\ntwo\nthree\nfour\n")
    return s


def call(sx, code, args, profile=None, **kw):
    return invoke(code, profile or SandboxProfile(fs_read=("~/notes",)), args, kw.pop("input_schema", SCHEMA_IN),
                  kw.pop("output_schema", SCHEMA_OUT), workspace=sx.workspace, env=sx.env, **kw)


def test_happy_path(sx):
    import blake3
    code = sx.executor("read_tail", READ_TAIL)
    out = call(sx, code, {"path": "~/notes/diary.md"}, ctx={"n": 3})
    assert out.ok, out
    assert out.kind is None and out.output == {"lines": ["two", "three", "four"]} and out.exit_code == 0
    assert out.output_sha == blake3.blake3(b'{"lines": ["two", "three", "four"]}').hexdigest()
    assert "debug output" in out.stderr_tail
    expected = ("policy", "bwrap", "seccomp", "landlock") if sx.env.get("METNOS_SANDBOX") != "0" else ("policy",)
    assert out.layers[: len(expected)] == expected
    rec = out.to_record()
    assert rec["ok"] is True and isinstance(rec["layers"], list)


def test_input_schema_violation_before_spawn(sx):
    code = sx.executor("boom", "raise SystemExit('must never be loaded')\n")
    out = call(sx, code, {"path": 3})
    assert out.kind == "SchemaViolation" and out.error["where"] == "input" and out.error["path"] == "/path"
    assert out.exit_code is None


def test_policy_violation_before_spawn(sx):
    code = sx.executor("boom", "raise SystemExit('must never be loaded')\n")
    out = call(sx, code, {"path": str(sx.home / "notes-evil" / "x")})
    assert out.kind == "PolicyViolation" and out.error["argument"] == "/path" and out.error["rule"] == "outside-grant"
    assert out.exit_code is None


def test_output_schema_violation(sx):
    code = sx.executor("bad_out", "def run(args, ctx):\n    return {'lines': 'not a list'}\n")
    out = call(sx, code, {"path": "~/notes/diary.md"})
    assert out.kind == "SchemaViolation" and out.error["where"] == "output" and out.output is None


def test_non_json_output(sx):
    code = sx.executor("garbage", "import os\ndef run(args, ctx):\n    os.write(3, b'not json')\n    os._exit(0)\n")
    out = call(sx, code, {"path": "~/notes/diary.md"})
    assert out.kind == "NonJSONOutput"


KEEPS_GOING = """
import os, time
def run(args, ctx):
    # A whole result frame straight on the result channel, then work that never ends.
    os.write(3, b'11\\n{"done": 1}')
    i = 0
    while True:
        open(os.path.join(args["dir"], str(i)), "w").close()
        i += 1
        time.sleep(0.01)
"""


def _invocation_groups() -> set[str]:
    from metnos.mechanisms.sandbox import cgroup

    p = cgroup.placement()
    return {d.name for parent in {p.pids, p.memory} - {None} for d in parent.glob("metnos-inv-*")}


def test_a_whole_result_ends_the_call_and_what_runs_after_it_is_killed(sx, monkeypatch):
    # The result is whole once its frame is: the runtime does not wait for
    # the sandbox to wind down (bwrap's init and bwrap exit after the host),
    # it kills the tree. Nothing the executor left running goes on.
    if sx.env.get("METNOS_SANDBOX") == "0":
        pytest.skip("without bwrap the tree is waited out")
    from metnos.mechanisms.invocation import pump
    from metnos.mechanisms.sandbox import cgroup

    out_dir = sx.home / "out"
    out_dir.mkdir()
    # This call's own groups: other processes (tests run side by side) make and remove theirs.
    taken: list[Path] = []
    handing_out = cgroup.for_invocation

    def watched(*args, **kwargs):
        group = handing_out(*args, **kwargs)
        taken.extend(group.dirs)
        return group

    monkeypatch.setattr(cgroup, "for_invocation", watched)
    code = sx.executor("keeps_going", KEEPS_GOING)
    out = invoke(code, SandboxProfile(fs_write=("~/out",), max_duration_s=20), {"dir": str(out_dir)},
                 workspace=sx.workspace, env=sx.env)
    assert out.ok and out.output == {"done": 1} and out.exit_code == 0, out
    assert out.duration_ms < 10_000  # not the 20 s deadline
    assert pump.finished(timeout=10)
    made = len(list(out_dir.iterdir()))
    time.sleep(0.3)
    assert len(list(out_dir.iterdir())) == made  # nothing writes any more
    assert taken and _invocation_groups().isdisjoint(d.name for d in taken)  # its cgroup is gone too


def test_executor_exception_is_a_crash_with_stderr_tail(sx):
    code = sx.executor("raises", "class NotFound(Exception):\n    pass\ndef run(args, ctx):\n    raise NotFound('no such note')\n")
    out = call(sx, code, {"path": "~/notes/diary.md"})
    assert out.kind == "Crash" and out.exit_code == 1
    assert out.error == {"type": "NotFound", "message": "no such note"}
    assert "Traceback" in out.stderr_tail


def test_missing_main_is_a_crash_not_a_traceback(sx):
    code = sx.root / "empty"
    code.mkdir()
    out = call(sx, code, {"path": "~/notes/diary.md"})
    assert out.kind == "Crash" and out.error["type"] == "FileNotFoundError"


def test_timeout(sx):
    code = sx.executor("sleepy", "import time\ndef run(args, ctx):\n    time.sleep(30)\n")
    out = call(sx, code, {"path": "~/notes/diary.md"}, SandboxProfile(fs_read=("~/notes",), max_duration_s=0.5))
    assert out.kind == "Timeout" and out.duration_ms < 2000


def test_site_packages_only_when_asked(sx):
    src = "def run(args, ctx):\n    try:\n        import blake3\n        return {'lines': ['yes']}\n    except ImportError:\n        return {'lines': ['no']}\n"
    code = sx.executor("needs_pkg", src)
    assert call(sx, code, {"path": "~/notes/diary.md"}).output == {"lines": ["no"]}
    out = call(sx, code, {"path": "~/notes/diary.md"}, SandboxProfile(fs_read=("~/notes",), site_packages=True))
    assert out.output == {"lines": ["yes"]}, out


def test_a_sandbox_that_cannot_be_built_names_its_cause(sx, monkeypatch):
    # bwrap holds its sandbox until the runtime has put it in the invocation's
    # cgroup; when it fails while building it, its own message still arrives.
    if sx.env.get("METNOS_SANDBOX") == "0":
        pytest.skip("about bwrap")
    import metnos.mechanisms.invocation.runner as runner

    real = runner.plan_for

    def broken(*a, **kw):
        plan = real(*a, **kw)
        plan.bwrap_args += ["--ro-bind", "/nonexistent-metnos-source", "/nonexistent-metnos-source"]
        return plan

    monkeypatch.setattr(runner, "plan_for", broken)
    out = call(sx, sx.executor("read_tail", READ_TAIL), {"path": "~/notes/diary.md"})
    assert out.kind == "Crash" and out.error["type"] == "Exited", out
    assert "the sandbox could not start" in out.error["message"]
    assert "/nonexistent-metnos-source" in out.error["message"]


def _call_one_that_marks_at_import(sx, tmp_path):
    """Invoke an executor that leaves a file as soon as its module loads."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code = sx.executor("runs_at_import", f"""
        open({str(out_dir / "ran")!r}, "w").close()
        def run(args, ctx):
            return {{}}
    """)
    out = call(sx, code, {}, SandboxProfile(fs_write=(str(out_dir),)), input_schema={"type": "object"},
               output_schema={"type": "object"})
    return out, out_dir / "ran"


def test_a_sandbox_that_cannot_join_its_cgroup_never_runs(sx, monkeypatch, tmp_path):
    if sx.env.get("METNOS_SANDBOX") == "0":
        pytest.skip("about bwrap's gate")
    import dataclasses

    from metnos.mechanisms.sandbox import cgroup

    # The gate is how the sandbox joins where a thread cannot step into a
    # cgroup itself (cgroup v2); on this machine it has to be asked for.
    real_placement = cgroup.placement()
    monkeypatch.setattr(cgroup, "placement", lambda: dataclasses.replace(real_placement, thread_moves=False))
    moved = []
    real = cgroup.InvocationCgroup.attach

    def attach(self, pid):
        moved.append(pid)
        if len(moved) == 2:  # bwrap went in; its sandbox child is refused
            raise PermissionError(13, "refused by the test")
        real(self, pid)

    monkeypatch.setattr(cgroup.InvocationCgroup, "attach", attach)
    out, ran = _call_one_that_marks_at_import(sx, tmp_path)
    assert out.kind == "Crash" and out.error["type"] == "SpawnFailed", out
    assert "could not put the sandbox in its cgroup" in out.error["message"]
    assert len(moved) == 2
    assert not ran.exists()


def _needs_thread_moves():
    from metnos.mechanisms.sandbox import cgroup

    if not cgroup.placement().thread_moves:
        pytest.skip("a thread cannot move itself between cgroups here (not cgroup v1)")


def _own_cgroups() -> str:
    return Path("/proc/thread-self/cgroup").read_text()


def test_the_spawning_thread_is_back_in_its_own_cgroups_after_the_call(sx):
    # The child is born in the invocation's groups because the spawning
    # thread steps into them; the runtime itself must never stay there.
    _needs_thread_moves()
    code = sx.executor("read_tail", READ_TAIL)
    seen = {}

    def call_and_look(name):
        before = _own_cgroups()
        out = call(sx, code, {"path": "~/notes/diary.md"})
        seen[name] = (before, _own_cgroups(), out)

    call_and_look("main")
    worker = threading.Thread(target=call_and_look, args=("worker",))
    worker.start()
    worker.join()
    for name, (before, after, out) in seen.items():
        assert out.ok and "pids-cgroup" in out.layers, (name, out)
        assert after == before and "metnos-inv-" not in after, name


def test_a_sandbox_whose_thread_cannot_step_in_never_runs(sx, monkeypatch, tmp_path):
    _needs_thread_moves()
    from metnos.mechanisms.sandbox import cgroup

    real = cgroup._move_this_thread

    def move(group):
        if group.name.startswith("metnos-inv-"):
            raise PermissionError(13, "refused by the test")
        real(group)

    monkeypatch.setattr(cgroup, "_move_this_thread", move)
    before = _own_cgroups()
    out, ran = _call_one_that_marks_at_import(sx, tmp_path)
    assert out.kind == "Crash" and out.error["type"] == "SpawnFailed", out
    assert "could not put the sandbox in its cgroup" in out.error["message"]
    assert not ran.exists()
    assert _own_cgroups() == before


def test_the_runtime_is_never_among_the_members_it_kills(tmp_path):
    # A thread of the runtime stuck in an invocation's group (its way back
    # refused) makes the runtime a member of the group: killing the group
    # must not kill the runtime.
    _needs_thread_moves()
    from metnos.mechanisms.sandbox import cgroup

    cg = cgroup.InvocationCgroup(max_pids=16, memory_bytes=256 << 20)
    try:
        cg.enter_this_thread()
        try:
            listed = {int(x) for x in Path(cg._procs[0]).read_text().split()}
            assert os.getpid() in listed  # the kernel counts the runtime in
            assert os.getpid() not in cg.pids()
            assert cg.kill_all(deadline_s=0.5)  # and this process is still here
        finally:
            cg.leave_this_thread()
    finally:
        cg.close()


def test_through_the_gate_the_caps_hold_too(sx, monkeypatch):
    # Where a thread cannot step into a cgroup (cgroup v2), bwrap holds its
    # sandbox until the runtime has moved it in: the pids cap holds there as well.
    if sx.env.get("METNOS_SANDBOX") == "0":
        pytest.skip("about bwrap's gate")
    import dataclasses

    from metnos.mechanisms.sandbox import cgroup

    real = cgroup.placement()
    if real.pids is None:
        pytest.skip(f"no pids cgroup here: {real.pids_error}")
    monkeypatch.setattr(cgroup, "placement", lambda: dataclasses.replace(real, thread_moves=False))
    code = sx.executor("forks", """
        import os, time
        def run(args, ctx):
            n, err = 0, None
            for _ in range(50):
                try:
                    pid = os.fork()
                except OSError as e:
                    err = e.errno
                    break
                if pid == 0:
                    time.sleep(30)
                    os._exit(0)
                n += 1
            return {"forked": n, "errno": err}
    """)
    out = call(sx, code, {}, SandboxProfile(max_pids=8, max_duration_s=10), input_schema={"type": "object"},
               output_schema={"type": "object"})
    assert out.ok and "pids-cgroup" in out.layers, out
    assert out.output["forked"] < 8 and out.output["errno"] is not None


def test_without_bwrap_the_host_dies_with_the_runtime(sx, tmp_path):
    # With METNOS_SANDBOX=off nothing but the host's own parent-death signal
    # stops an executor whose runtime was killed.
    if sx.env.get("METNOS_SANDBOX") != "0":
        pytest.skip("bwrap's --die-with-parent covers the sandbox (test_escape_battery)")
    import json
    import subprocess
    import sys
    import textwrap
    import time

    from tests.support.runtime_kill import kill_and_wait_until

    marker = tmp_path / "started"
    code = sx.executor("sleeper", f"""
        import os, time
        def run(args, ctx):
            with open({str(marker)!r}, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(60)
            return {{}}
    """)
    parent_src = textwrap.dedent(f"""
        import json, sys
        from metnos.mechanisms.invocation.runner import invoke
        from metnos.mechanisms.sandbox.profile import SandboxProfile
        from metnos.settings.workspace import Workspace
        env = json.loads(sys.argv[1])
        invoke({str(code)!r}, SandboxProfile(max_duration_s=60), {{}}, workspace=Workspace.from_env(env), env=env)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_src, json.dumps(sx.env)], cwd=os.getcwd(),
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline and parent.poll() is None, "the executor never started"
            time.sleep(0.02)
        host = Path(f"/proc/{int(marker.read_text())}")
    except BaseException:
        parent.kill()
        parent.wait()
        raise

    def host_gone() -> bool:
        try:
            return host.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True

    kill_and_wait_until(parent, host_gone, "the host outlived its runtime")
