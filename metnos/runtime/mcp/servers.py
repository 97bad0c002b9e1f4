"""MCP servers as executors: add (pinned, listed in the sandbox, held for approval), approve, remove, list.

``plan_add`` resolves and pins the server (metnos.mechanisms.executors.mcp_pin),
starts it in the sandbox with the user's grants to list its tools (a folder
holding only the bridge, run unsigned: it is given nothing to sign yet), and
derives one executor per tool (metnos.runtime.mcp.derive). Nothing is written
until the user confirms. ``install_plan`` signs every folder with the instance
key into ``executors/mcp/NAME/VERSION/`` and registers each version in the log
as quarantined (check ``approval``), as an imported skill is; ``approve`` lifts
that after checking the files and the pin again. Adding a server again that is
already there installs the next version of each tool (the lifecycle wants a
change to bump the version) and archives the old ones: that is how a server
quarantined for a changed digest or schema is re-approved. ``remove`` archives
every version in the log and deletes the folders.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventsourcing.application import AggregateNotFoundError

from domain.errors import MetnosError
from domain.executor import Executor, LifecycleError, executor_id
from metnos.mechanisms.executors.code_check import problems_in_source
from metnos.mechanisms.executors.context import build_ctx
from metnos.mechanisms.executors.install import install_executor
from metnos.mechanisms.executors.keys import load_signing_key
from metnos.mechanisms.executors.manifest import ManifestError, load_manifest
from metnos.mechanisms.executors.mcp_pin import PinError, pin_command, pin_problem, read_server_spec
from metnos.mechanisms.executors.signing import SigningError, verify_executor
from metnos.mechanisms.invocation.runner import invoke
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.runtime.mcp.derive import CAPS, DeriveError, Grants, Server, check_server_name, executor_files, executor_name, idempotent, lister_files, read_only
from metnos.runtime.taken_names import taken_names

ORIGIN = "mcp"
APPROVAL = "approval"
FIRST_VERSION = "1.0.0"


class McpRefused(MetnosError):
    """The server cannot be added, approved or removed: names the cause and the fix."""


@dataclass(frozen=True)
class ToolPlan:
    tool: dict[str, Any]
    executor: str
    version: str
    files: dict[str, bytes]

    @property
    def side_effects(self) -> bool:
        return not read_only(self.tool)

    @property
    def idempotent(self) -> bool:
        return idempotent(self.tool)

    @property
    def annotated(self) -> bool:
        return bool(self.tool.get("annotations"))


@dataclass(frozen=True)
class AddPlan:
    server: Server
    server_info: dict[str, Any]
    tools: list[ToolPlan]
    # Executors of an earlier add of the same server, archived when this one is installed.
    replaces: list[tuple[str, str]]


def _server_entries(runtime: Any, server: str) -> list[dict[str, Any]]:
    out = []
    for entry in runtime.catalogue_state()["executors"].values():
        if entry["origin"] != ORIGIN:
            continue
        if _server_of(runtime, entry["name"]) == server:
            out.append(entry)
    return sorted(out, key=lambda e: e["name"])


def _folder(runtime: Any, name: str, version: str) -> Path:
    return runtime.workspace.executors_origin_dir(ORIGIN) / name / version


def _current(runtime: Any, name: str) -> str | None:
    try:
        return (runtime.workspace.executors_origin_dir(ORIGIN) / name / "CURRENT").read_text().strip()
    except OSError:
        return None


def _server_of(runtime: Any, name: str) -> str | None:
    version = _current(runtime, name)
    if version is None:
        return None
    try:
        created_by = load_manifest(_folder(runtime, name, version) / "manifest.toml").executor.created_by
    except ManifestError:
        return None
    return created_by.split(":", 1)[1]


def _next_version(entry: dict[str, Any] | None) -> str:
    if not entry or not entry["versions"]:
        return FIRST_VERSION
    major, minor, patch = max(tuple(int(p) for p in v.split(".")[:3]) for v in entry["versions"])
    return f"{major}.{minor}.{patch + 1}"


def _profile(server: Server) -> SandboxProfile:
    reads = [*server.grants.read, *(server.pin.get("reads") or [])]
    return SandboxProfile(fs_read=tuple(sorted(set(reads))), fs_write=tuple(sorted(set(server.grants.write))),
                          network_hosts=tuple(sorted(set(server.host_patterns()))),
                          binaries=tuple(server.command[:1]), site_packages=True, **CAPS)


def list_tools(runtime: Any, server: Server, *, staging: Path) -> dict[str, Any]:
    """The server's tools as it lists them, started (or reached) from inside the sandbox."""
    shutil.rmtree(staging, ignore_errors=True)
    for rel, data in lister_files(server).items():
        path = staging / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    profile = _profile(server)
    ctx = build_ctx(now=runtime.clock().isoformat(), workspace=runtime.workspace, profile=profile,
                    name=f"mcp:{server.name}", version=FIRST_VERSION, config=runtime.config)
    try:
        outcome = invoke(staging, profile, {}, workspace=runtime.workspace, ctx=ctx)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not outcome.ok or not isinstance(outcome.output, dict) or "tools" not in outcome.output:
        detail = outcome.error or {}
        tail = outcome.stderr_tail.strip().splitlines()[-3:] if outcome.stderr_tail else []
        raise McpRefused(f"the MCP server {server.name!r} did not list its tools in the sandbox: {outcome.kind}: "
                         f"{detail.get('message') or detail}" + (f" ({' / '.join(tail)})" if tail else "")
                         + "; check the command runs (`COMMAND --help`) and that the grants cover what it needs")
    return outcome.output


def plan_add(runtime: Any, name: str, *, command: list[str] | None = None, url: str | None = None,
             grants: Grants = Grants(), env: dict[str, str] | None = None) -> AddPlan:
    """Pin, list and derive; nothing is installed yet."""
    try:
        check_server_name(name)
    except DeriveError as e:
        raise McpRefused(str(e)) from None
    if bool(command) == bool(url):
        raise McpRefused("give either a command (`metnos mcp add NAME -- COMMAND ARGS...`) or `--url URL`, not both")
    if command:
        try:
            resolved, pin = pin_command(list(command))
        except PinError as e:
            raise McpRefused(str(e)) from None
        bad = [k for k in env or {} if not re.match(r"^[A-Z_][A-Z0-9_]*$", k)]
        if bad:
            raise McpRefused(f"--env {bad[0]}: a variable name is UPPER_SNAKE, e.g. GIT_AUTHOR_NAME")
        server = Server(name, "stdio", command=tuple(resolved), pin=pin.to_record(), grants=grants, env=dict(env or {}))
    else:
        assert url is not None
        if not url.startswith(("http://", "https://")):
            raise McpRefused(f"--url {url!r}: an MCP server over HTTP needs an http:// or https:// URL")
        if env:
            raise McpRefused("--env sets a stdio server's environment; a server over HTTP has its own")
        server = Server(name, "http", url=url, pin={"url": url}, grants=grants)
    listing = list_tools(runtime, server, staging=runtime.workspace.runtime_dir / "mcp" / name)
    tools = listing["tools"]
    if not tools:
        raise McpRefused(f"the MCP server {name!r} offers no tools; nothing to add")
    state = runtime.catalogue_state()["executors"]
    earlier = {_tool_of(runtime, e["name"]): e for e in _server_entries(runtime, name)}
    taken = taken_names(runtime.catalogue_state()) - {e["name"] for e in earlier.values()}
    created_at = runtime.clock().isoformat(timespec="seconds")
    plans = []
    for tool in sorted(tools, key=lambda t: t["name"]):
        before = earlier.get(tool["name"])
        exe = before["name"] if before else executor_name(name, tool["name"], is_read_only=read_only(tool), taken=taken)
        taken.add(exe)
        version = _next_version(state.get(f"{ORIGIN}/{exe}"))
        try:
            files = executor_files(exe, version, server, tool, created_at)
        except DeriveError as e:
            raise McpRefused(f"{name}: {e}") from None
        plans.append(ToolPlan(tool, exe, version, files))
    replaces = [(e["name"], v) for e in earlier.values() for v, s in e["versions"].items() if s["state"] != "archived"]
    return AddPlan(server, dict(listing.get("server_info") or {}), plans, replaces)


def _tool_of(runtime: Any, name: str) -> str | None:
    version = _current(runtime, name)
    if version is None:
        return None
    try:
        return read_server_spec(_folder(runtime, name, version)).get("tool")
    except PinError:
        return None


def install_plan(runtime: Any, plan: AddPlan) -> list[Path]:
    """Sign and install every tool's executor, or none; each held in quarantine for approval."""
    staging = runtime.workspace.runtime_dir / "mcp" / f"{plan.server.name}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    origin_dir = runtime.workspace.executors_origin_dir(ORIGIN)
    installed: list[Path] = []
    try:
        key = load_signing_key(runtime.workspace)
        for t in plan.tools:
            folder = staging / t.executor
            for rel, data in t.files.items():
                if rel.endswith(".py"):
                    problems = [str(p) for p in problems_in_source(data, rel)]
                    if problems:
                        raise McpRefused(f"{plan.server.name}: {t.executor}/{rel} cannot be signed: {problems[0]}")
                path = folder / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            try:
                installed.append(install_executor(folder, origin_dir, key))
            except SigningError as e:
                for done in installed:
                    shutil.rmtree(done, ignore_errors=True)
                raise McpRefused(f"{plan.server.name}: signing refused {t.executor}: {e}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _hold(runtime, plan, installed)
    for name, version in plan.replaces:
        if (name, version) not in {(p.parent.name, p.name) for p in installed}:
            shutil.rmtree(_folder(runtime, name, version), ignore_errors=True)
    return installed


def _describe_server(server: Server) -> str:
    what = " ".join(server.command) if server.transport == "stdio" else server.url
    grants = ", ".join(f"{k}={','.join(v)}" for k, v in server.grants.to_record().items() if v) or "none"
    pinned = server.pin.get("digest") or f"url {server.url}"
    return f"the MCP server {server.name!r} ({what}), pinned {pinned}, grants {grants}"


def _hold(runtime: Any, plan: AddPlan, installed: list[Path]) -> None:
    """Registered, signed, quarantined until approved; earlier versions archived: in one commit."""
    at = runtime.clock()
    touched: dict[str, Executor] = {}

    def aggregate(name: str) -> Executor:
        if name not in touched:
            try:
                touched[name] = runtime.log.repository.get(executor_id(ORIGIN, name))
            except AggregateNotFoundError:
                touched[name] = Executor.register(name=name, origin=ORIGIN, at=at)
        return touched[name]

    tools = {t.executor: t for t in plan.tools}
    for folder in installed:
        name, version = folder.parent.name, folder.name
        check = verify_executor(folder, runtime.verify_key)
        digest = check.digest or "unverified"
        e = aggregate(name)
        t = tools[name]
        e.register_version(version=version, digest=digest,
                           summary=f"tool {t.tool['name']!r} of {_describe_server(plan.server)}"[:300], at=at)
        e.record_signature(version=version, digest=digest, key_id=runtime.key_id, at=at)
        asked = "read-only" if not t.side_effects else "side effects: every call asks"
        e.quarantine(version=version, check=APPROVAL, file=None, at=at,
                     reason=f"added from {_describe_server(plan.server)}; tool {t.tool['name']!r} ({asked}); "
                            f"waiting for `metnos mcp approve {plan.server.name}`")
    for name, version in plan.replaces:
        e = aggregate(name)
        if e.state_of(version) not in (None, "archived"):
            e.archive(version=version, reason=f"replaced by a new add of the MCP server {plan.server.name!r}",
                      by="user", at=at)
    runtime.log.save(*touched.values())
    runtime.refresh()


def approve(runtime: Any, server: str) -> list[str]:
    """Lift the approval quarantine of every tool of ``server`` after checking files and pin again."""
    entries = _server_entries(runtime, server)
    if not entries:
        raise McpRefused(f"there is no MCP server named {server!r}; see `metnos mcp list`")
    lifted, held = [], []
    for entry in entries:
        version = _current(runtime, entry["name"])
        state = entry["versions"].get(version or "", {})
        if state.get("state") != "quarantined":
            continue
        if state.get("check") != APPROVAL:
            held.append(f"{entry['name']}: {state.get('reason')}")
            continue
        folder = _folder(runtime, entry["name"], version or "")
        check = verify_executor(folder, runtime.verify_key)
        if not check.ok:
            bad = check.failure
            raise McpRefused(f"{entry['name']} {version} fails {bad.file}: {bad.check}: {bad.detail}; it stays quarantined")
        problem = pin_problem(folder)
        if problem:
            raise McpRefused(f"{entry['name']} {version}: {problem}; it stays quarantined")
        e = runtime.log.repository.get(executor_id(ORIGIN, entry["name"]))
        try:
            e.rehabilitate(version=version, digest=check.digest, by="user", at=runtime.clock())
        except LifecycleError as err:
            raise McpRefused(str(err)) from None
        runtime.log.save(e)
        lifted.append(entry["name"])
    runtime.refresh()
    if held and not lifted:
        raise McpRefused(f"the MCP server {server!r} is quarantined for a change, not waiting for approval: {held[0]}; "
                         f"add it again (`metnos mcp add {server} ...`) to see and approve what it offers now")
    return lifted


def remove(runtime: Any, server: str) -> list[str]:
    """Archive every version of the server's executors in the log, then delete their folders."""
    entries = _server_entries(runtime, server)
    if not entries:
        raise McpRefused(f"there is no MCP server named {server!r}; see `metnos mcp list`")
    at = runtime.clock()
    aggregates = []
    for entry in entries:
        e = runtime.log.repository.get(executor_id(ORIGIN, entry["name"]))
        for version in sorted(e.versions):
            e.archive(version=version, reason=f"the MCP server {server!r} was removed", by="user", at=at)
        aggregates.append(e)
    runtime.log.save(*aggregates)
    for entry in entries:
        shutil.rmtree(runtime.workspace.executors_origin_dir(ORIGIN) / entry["name"], ignore_errors=True)
    runtime.refresh()
    return [e["name"] for e in entries]


def servers(runtime: Any) -> list[dict[str, Any]]:
    """Each MCP server: how it runs, what it is pinned to, its grants, and each tool's executor and state."""
    by_server: dict[str, dict[str, Any]] = {}
    for entry in sorted(runtime.catalogue_state()["executors"].values(), key=lambda e: e["name"]):
        if entry["origin"] != ORIGIN:
            continue
        version = _current(runtime, entry["name"])
        if version is None:
            continue
        try:
            spec = read_server_spec(_folder(runtime, entry["name"], version))
        except PinError:
            continue
        row = by_server.setdefault(spec["server"], {
            "server": spec["server"], "transport": spec["transport"], "command": spec.get("command") or [],
            "url": spec.get("url"), "digest": (spec.get("pin") or {}).get("digest"),
            "distribution": (spec.get("pin") or {}).get("distribution"), "grants": spec.get("grants") or {}, "tools": []})
        state = entry["versions"].get(version, {})
        row["tools"].append({"tool": spec["tool"], "executor": entry["name"], "version": version,
                             "state": state.get("state"), "reason": state.get("reason")})
    return [by_server[k] for k in sorted(by_server)]

