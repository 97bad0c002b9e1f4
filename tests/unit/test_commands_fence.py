"""run_commands' fence in pieces: the program check before the spawn, the Landlock rules that leave
execution to the listed programs alone, and a call's write grant narrowed to its own arguments."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metnos.mechanisms.executors.manifest import ManifestError, parse_manifest
from metnos.mechanisms.failures import PolicyViolation
from metnos.mechanisms.sandbox import landlock
from metnos.mechanisms.sandbox.bwrap import plan_for
from metnos.mechanisms.sandbox.policy import check_args, scope_for, writes_narrowed_to_arguments
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.mechanisms.sandbox.programs import executed_for, find_program
from metnos.settings.commands import COMMANDS_ALLOW, CommandsConfig
from tests.support.sandbox_env import make_env

SCHEMA = {"type": "object", "properties": {
    "program": {"type": "string", "x-program": True},
    "args": {"type": "array", "items": {"type": "string"}},
    "cwd": {"type": "string", "format": "path", "x-access": "write"}}}
PROFILE = SandboxProfile(fs_read=("~",), fs_write=("~",), binaries=(COMMANDS_ALLOW,))


@pytest.fixture
def sx(tmp_path, monkeypatch):
    s = make_env(tmp_path)
    (s.home / "garden").mkdir()
    return s


def configure(sx, text: str) -> None:
    sx.workspace.config_file.parent.mkdir(parents=True, exist_ok=True)
    sx.workspace.config_file.write_text(text)


def violation(sx, args) -> PolicyViolation:
    with pytest.raises(PolicyViolation) as e:
        check_args(args, SCHEMA, scope_for(PROFILE, workspace=sx.workspace, env=sx.env))
    return e.value


def test_a_listed_program_passes_and_others_are_refused_naming_the_setting(sx):
    assert check_args({"program": "du", "args": ["-sh", "~"]}, SCHEMA,
                      scope_for(PROFILE, workspace=sx.workspace, env=sx.env))["/program"] == "du"
    v = violation(sx, {"program": "rm", "args": ["-rf", "~"]})
    assert (v.argument, v.rule) == ("/program", "unlisted-program") and "[commands] allow" in v.detail
    assert violation(sx, {"program": "/usr/bin/du"}).rule == "program-path"
    assert violation(sx, {"program": "du -sh ~/Music"}).rule == "program-with-arguments"
    assert violation(sx, {"program": ""}).rule == "bad-program"


def test_the_settings_decide_the_list_and_the_position_of_the_axis(sx):
    configure(sx, '[commands]\nallow = ["sed"]\n')
    assert violation(sx, {"program": "du"}).rule == "unlisted-program"
    scope = scope_for(PROFILE, workspace=sx.workspace, env=sx.env)
    assert scope.programs == ("sed",) and scope.exec_fence == ("sed",)
    configure(sx, '[commands]\nshell = "forbidden"\n')
    v = violation(sx, {"program": "ls"})
    assert v.rule == "shell-forbidden" and "[commands] shell" in v.detail
    assert scope_for(PROFILE, workspace=sx.workspace, env=sx.env).exec_fence == ()
    configure(sx, '[commands]\nshell = "free"\n')
    scope = scope_for(PROFILE, workspace=sx.workspace, env=sx.env)
    assert check_args({"program": "/bin/sh"}, SCHEMA, scope)["/program"] == "/bin/sh" and scope.exec_fence is None


def test_a_profile_without_commands_gets_no_fence(sx):
    # A skill's python3 is no [commands] program: its sandbox is as it always was.
    scope = scope_for(SandboxProfile(binaries=("python3",)), workspace=sx.workspace, env=sx.env)
    assert scope.exec_fence is None


@pytest.mark.parametrize("names", [["x y"], ["a/b"], [""], "du"])
def test_allow_holds_bare_names_only(names):
    with pytest.raises(ValueError, match="program names"):
        CommandsConfig(allow=names)


@pytest.mark.parametrize("launcher", ["find", "xargs", "env", "sh", "python3", "busybox"])
def test_a_program_that_starts_programs_cannot_be_listed(launcher):
    with pytest.raises(ValueError, match="cannot be listed"):
        CommandsConfig(allow=["du", launcher])
    assert launcher in CommandsConfig(shell="free", allow=["du", launcher]).allow


def test_landlock_executes_only_the_listed_programs_and_their_loader(sx):
    plan = plan_for(Path(__file__).parent, PROFILE, workspace=sx.workspace, env=sx.env)
    executable = {path for path, rights in plan.landlock_rules if rights & landlock.FS_EXECUTE}
    du = find_program("du")
    assert du is not None and executable == {str(p) for p in executed_for(du)} | {
        str(p) for name in CommandsConfig().allow if (found := find_program(name)) for p in executed_for(found)}
    assert "/usr" not in executable and str(sx.home) not in executable and "/tmp" not in executable
    assert any(os.path.basename(p).startswith("ld-linux") for p in executable)


def test_a_call_may_write_only_its_own_cwd(sx):
    narrowed = writes_narrowed_to_arguments(PROFILE, {"program": "git", "cwd": "~/garden"}, SCHEMA,
                                            workspace=sx.workspace, env=sx.env)
    assert narrowed.fs_write == (str(sx.home / "garden"),) and "~" in narrowed.fs_read
    nothing = writes_narrowed_to_arguments(PROFILE, {"program": "du"}, SCHEMA, workspace=sx.workspace, env=sx.env)
    assert nothing.fs_write == ()
    # A cwd the policy refuses leaves the profile as signed: the check before the spawn names the cause.
    refused = writes_narrowed_to_arguments(PROFILE, {"program": "ls", "cwd": "/etc"}, SCHEMA, workspace=sx.workspace, env=sx.env)
    assert refused == PROFILE


MANIFEST = b'''
[executor]
name = "run_things"
version = "1.0.0"
created_at = 2026-05-01T00:00:00Z
created_by = "seed"
summary = "x"
affinity = ["x"]
[description]
en = "x"
[contract]
idempotent = false
side_effects = true
[capabilities]
%s
'''


def test_run_is_an_action_and_narrowing_needs_a_write_grant():
    m = parse_manifest(MANIFEST % b'"fs:write" = ["~"]\n"fs:write:arguments" = true')
    assert m.verb_category == "A" and m.capabilities.fs_write_arguments
    with pytest.raises(ManifestError, match="narrows fs:write"):
        parse_manifest(MANIFEST % b'"fs:write:arguments" = true')
    # A field the profile does not hold: the lock of every other executor is what it was.
    assert "fs_write_arguments" not in m.sandbox_profile().model_dump()
