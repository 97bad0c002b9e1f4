"""What Metnos derives from an MCP server's tool, and what it pins a server to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metnos.mechanisms.executors.manifest import parse_manifest
from metnos.mechanisms.executors.mcp_pin import PinError, pin_command, pin_problem
from metnos.runtime.mcp.derive import Grants, Server, executor_files, executor_name, input_schema, manifest_text

GIT_LOG = {"name": "git_log", "description": "Shows the commit logs.",
           "inputSchema": {"type": "object", "required": ["repo_path"], "properties": {
               "repo_path": {"type": "string"}, "target": {"type": "string"}, "max_count": {"type": "integer"},
               "url": {"type": "string"}, "item": {"$ref": "#/$defs/Item"}},
               "$defs": {"Item": {"type": "object"}}},
           "annotations": {"readOnlyHint": True}, "digest": "sha256:0"}


@pytest.mark.parametrize(("server", "tool", "read_only", "expected"), [
    ("time", "get_current_time", True, "get_current_time"),
    ("time", "convert_time", True, "compute_convert_time"),
    ("fetch", "fetch", True, "get_fetch"),
    ("git", "git_status", True, "get_git_status"),
    ("git", "git_show", True, "render_git_show"),
    ("git", "git_commit", False, "change_git_commit"),
    ("git", "git_add", False, "create_git_add"),
    ("git", "git_create_branch", False, "create_git_branch"),
    # A verb that does not fit the tool's side effects is not taken: a read-only "delete_" is a get.
    ("bin", "delete_preview", True, "get_bin_delete_preview"),
])
def test_a_tool_name_becomes_verb_object_in_the_closed_vocabulary(server: str, tool: str, read_only: bool, expected: str) -> None:
    assert executor_name(server, tool, is_read_only=read_only, taken=set()) == expected


def test_a_taken_name_is_never_reused() -> None:
    assert executor_name("time", "get_current_time", is_read_only=True, taken={"get_current_time"}) == "get_time_current_time"
    assert executor_name("time", "get_current_time", is_read_only=True,
                         taken={"get_current_time", "get_time_current_time"}) == "get_time_current_time_2"


def test_paths_are_checked_hosts_are_left_to_the_policy_and_the_rest_is_data() -> None:
    schema = input_schema(GIT_LOG, writes=False)
    props = schema["properties"]
    assert props["repo_path"]["format"] == "path" and "x-access" not in props["repo_path"]
    assert props["target"]["x-opaque"] is True
    assert "x-opaque" not in props["url"] and "x-opaque" not in props["max_count"]
    assert props["item"]["$ref"] == "#/definitions/Input/$defs/Item"
    assert input_schema(GIT_LOG, writes=True)["properties"]["repo_path"]["x-access"] == "write"


def test_the_manifest_holds_the_grants_and_a_read_only_tool_writes_nothing() -> None:
    server = Server("git", "stdio", command=("/usr/bin/git-mcp",), pin={"reads": []},
                    grants=Grants(read=("~/a",), write=("~/b",), network=()))
    m = parse_manifest(manifest_text("get_git_log", "1.0.0", server, GIT_LOG, "2026-11-28T00:00:00+00:00").encode())
    assert m.origin == "mcp" and m.executor.created_by == "mcp:git"
    assert not m.contract.side_effects and m.contract.idempotent
    assert m.capabilities.fs_read == ("~/a", "~/b") and m.capabilities.fs_write == ()
    assert m.capabilities.network == () and m.capabilities.code_exec == ("/usr/bin/git-mcp",)
    assert set(m.description) == {"en", "it"}
    unannotated = {**GIT_LOG, "name": "git_commit", "annotations": None}
    m = parse_manifest(manifest_text("change_git_commit", "1.0.0", server, unannotated, "2026-11-28T00:00:00+00:00").encode())
    assert m.contract.side_effects and not m.contract.idempotent and m.capabilities.fs_write == ("~/b",)


def test_a_changed_script_fails_its_pin_and_a_file_that_appeared_since_does_not(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text("print('hello')\n")
    flag = tmp_path / "flag"
    resolved, pin = pin_command(["python3", str(script), str(flag)])
    assert str(script) in pin.files and pin.scripts == (str(script),) and str(script) in pin.reads
    server = Server("demo", "stdio", command=tuple(resolved), pin=pin.to_record())
    folder = tmp_path / "exe"
    folder.mkdir()
    (folder / "server.json").write_bytes(executor_files("get_demo_note", "1.0.0", server, {**GIT_LOG, "name": "note"},
                                                        "2026-11-28T00:00:00+00:00")["server.json"])
    assert pin_problem(folder) is None
    flag.write_text("now")
    assert pin_problem(folder) is None
    script.write_text("print('changed')\n")
    problem = pin_problem(folder)
    assert problem is not None and "changed since it was approved" in problem and str(script) in problem
    assert json.loads((folder / "server.json").read_text())["pin"]["digest"] == pin.digest


def test_a_command_that_is_nowhere_is_refused_with_the_fix() -> None:
    with pytest.raises(PinError, match="install the server"):
        pin_command(["no-such-mcp-server-here"])


def test_an_idempotent_hint_never_lets_a_side_effect_run_unasked() -> None:
    from metnos.runtime.mcp.derive import idempotent
    claims = {"name": "wipe", "annotations": {"idempotentHint": True, "destructiveHint": True}}
    assert not idempotent(claims)
    assert idempotent({"name": "now", "annotations": {"readOnlyHint": True}})
