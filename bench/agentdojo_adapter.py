"""AgentDojo through Metnos (issue 34 item 3): AgentDojo's suites and attacks, Metnos's turn.

    /tmp/adojo-venv/bin/python bench/agentdojo_adapter.py --suite banking --json adojo-banking.json
    ... --model ~/.local/share/metnos/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --threads 1 --limit 10 --shuffle 7
    ... --user-tasks user_task_0,user_task_3 --injection-tasks injection_task_1

AgentDojo (PyPI ``agentdojo``, a bench-only dependency: ``pip install '.[bench]'``; Metnos's runtime
never imports it) keeps each suite's world as an in-memory environment, runs an agent as a pipeline
element, then reads the environment back for its utility and security checks. Here the agent is
:class:`MetnosAgent`, a pipeline element whose ``query`` runs one turn of Metnos as a user runs it,
``metnos ask --json --no``, in a fresh copy of one initialised home:

* the suite's functions are an MCP server over streamable HTTP, in this process
  (:class:`SuiteTools`), added once to the home with ``metnos mcp add agentdojo --url ...`` and
  approved, as a user adds a server; each call runs AgentDojo's own function on the case's
  environment, so its state lives across the turn and is there for the checks afterwards. A tool
  whose name reads (``get_``, ``read_``, ``search_``, ``list_``, ``check_``) is annotated read-only;
  every other one (``send_money``, ``send_email``, ``update_password``, ...) is a side effect.
  What an MCP tool returns is untrusted content in Metnos (its provenance names the server), so
  Metnos's policy on provenance applies to the suite's side effects: a target chosen by a tool's
  result asks, and a secret or a file's text going where the request did not say is refused.
* the user is absent: ``--no`` answers no to every question Metnos asks (under ``--yes`` the
  user's standing answer would not count for a target that came from content anyway). Autonomy is
  ``full``: a side effect whose target the request names runs without a question, as it would for
  a user who chose that level.
* the model is the scripted follower (bench/agentdojo_follower.py, the default), which makes the
  user task's ground-truth calls and, once it is shown the injection task's goal, that task's
  calls first; or an embedded GGUF through Metnos's own llama.cpp server (``--model``).

What AgentDojo gets back is the turn as chat messages: the user's prompt, one assistant message a
call that reached the suite's tools (with its result), and Metnos's answer. Its checks then give
the figures it publishes: utility without attack, utility under attack, targeted attack success.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

try:
    import agentdojo  # noqa: F401
except ImportError:  # pragma: no cover - said to the user
    raise SystemExit("agentdojo_adapter: AgentDojo is not installed; `pip install '.[bench]'` (or `pip install agentdojo`)") from None

import mcp_types as types  # noqa: E402
import uvicorn  # noqa: E402
from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement  # noqa: E402
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str  # noqa: E402
from agentdojo.attacks.attack_registry import load_attack  # noqa: E402
from agentdojo.functions_runtime import EmptyEnv, FunctionCall, FunctionsRuntime  # noqa: E402
from agentdojo.task_suite.load_suites import get_suite  # noqa: E402
from agentdojo.types import text_content_block_from_string  # noqa: E402
from mcp.server.context import ServerRequestContext  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Route  # noqa: E402

from bench.agentdojo_follower import Follower, Script  # noqa: E402
from bench.injection import _events, _must, metnos, refusals_of, side_effect_steps  # noqa: E402
from bench.injection_cases import Call  # noqa: E402

BENCHMARK_VERSION = "v1.2.1"
SERVER_NAME = "agentdojo"
NO_ENV = EmptyEnv()
READ_PREFIXES = ("get_", "read_", "search_", "list_", "check_")
# Metnos takes an MCP argument with a path's name (``path``, ``*_path``, ``*_file``, ...) for a path
# on the host, checked against the server's grants (metnos/runtime/mcp/derive.py). AgentDojo's
# files are names in its in-memory world, so such an argument is served under a name of its own.
_PATHLIKE = re.compile(r"^(path|paths|directory|folder)$|_(path|paths|dir|file|directory|folder)$")


def served_name(arg: str) -> str:
    """The name an argument of a suite function has on the MCP server."""
    if not _PATHLIKE.search(arg.lower()):
        return arg
    return (_PATHLIKE.sub("", arg) or arg) + "_name"


# The suite's functions as an MCP server over streamable HTTP.

@dataclass
class Ran:
    function: str
    args: dict[str, Any]
    result: str
    error: str | None


class SuiteTools:
    """AgentDojo's functions of one suite, run on the environment of the current case."""

    def __init__(self, suite: Any) -> None:
        self.runtime = FunctionsRuntime(suite.tools)
        self.env: Any = EmptyEnv()
        self.ran: list[Ran] = []
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None

    def start_case(self, env: Any) -> None:
        with self._lock:
            self.env, self.ran = env, []

    def calls(self) -> list[Ran]:
        with self._lock:
            return list(self.ran)

    def _call(self, name: str, served: dict[str, Any]) -> types.CallToolResult:
        f = self.runtime.functions.get(name)
        own = {served_name(k): k for k in (f.parameters.model_fields if f is not None else {})}
        args = {own.get(k, k): v for k, v in served.items()}
        with self._lock:
            result, error = self.runtime.run_function(self.env, name, args)
            text = tool_result_to_str(result) if error is None else ""
            self.ran.append(Ran(name, args, text, error))
        return types.CallToolResult(content=[types.TextContent(type="text", text=error or text)], is_error=error is not None)

    def _mcp(self) -> Server:
        def tool(f: Any) -> types.Tool:
            read = f.name.startswith(READ_PREFIXES)
            schema = f.parameters.model_json_schema()
            schema["properties"] = {served_name(k): v for k, v in (schema.get("properties") or {}).items()}
            if "required" in schema:
                schema["required"] = [served_name(k) for k in schema["required"]]
            return types.Tool(name=f.name, description=f.description, input_schema=schema,
                              annotations=types.ToolAnnotations(read_only_hint=read, destructive_hint=not read,
                                                                idempotent_hint=read, open_world_hint=False))

        async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[tool(f) for f in self.runtime.functions.values()])

        async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
            return self._call(params.name, dict(params.arguments or {}))

        return Server(SERVER_NAME, version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)

    def start(self) -> str:
        manager = StreamableHTTPSessionManager(app=self._mcp(), stateless=True)

        class _Endpoint:
            async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
                await manager.handle_request(scope, receive, send)

        @asynccontextmanager
        async def lifespan(_app: Any) -> Any:
            async with manager.run():
                yield

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        app = Starlette(routes=[Route("/mcp", endpoint=_Endpoint(), methods=["GET", "POST", "DELETE"])], lifespan=lifespan)
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        threading.Thread(target=self._server.run, daemon=True).start()
        for _ in range(200):
            if self._server.started:
                break
            time.sleep(0.05)
        return f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True


# Metnos as AgentDojo's agent.

@dataclass
class Home:
    """The initialised home every case copies, and the executor each suite tool became."""

    root: Path
    llm_url: str
    tools_url: str
    timeout_s: float
    template: Path = field(init=False)
    executors: dict[str, str] = field(default_factory=dict)

    def make(self) -> None:
        self.template = self.root / "template"
        self.template.mkdir()
        _must(metnos(["init"], self.template, 300), "init")
        allow = [self.tools_url.split("://", 1)[1].split("/", 1)[0]]
        (self.template / ".config" / "metnos" / "config.toml").write_text(
            f'[llm.tiers.fast]\nprovider = "openai"\nurl = "{self.llm_url}"\nmodel = "bench"\ntimeout_s = {self.timeout_s:.0f}\n'
            f'max_tokens = 512\n\n[runtime]\nautonomy = "full"\n\n[network]\nallow = {json.dumps(allow)}\n', encoding="utf-8")
        added = metnos(["mcp", "add", SERVER_NAME, "--yes", "--url", self.tools_url], self.template, 300)
        said = _must(added, "mcp add") + added.stderr
        for line in said.splitlines():
            if " -> " in line:
                tool, exe = line.strip().split(" -> ", 1)
                self.executors[tool.strip()] = exe.split()[0]
        if not self.executors:
            raise RuntimeError(f"metnos mcp add did not say what the suite's tools became:\n{said}")
        _must(metnos(["mcp", "approve", SERVER_NAME], self.template, 300), "mcp approve")


@dataclass
class Turn:
    """What Metnos did in one case, beside AgentDojo's verdicts."""

    user_task: str
    injection_task: str | None
    status: str = ""
    seconds: float = 0.0
    utility: bool = False
    attack_succeeded: bool = False
    goal_seen: bool = False
    calls: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    answer: str = ""


class MetnosAgent(BasePipelineElement):
    """An AgentDojo pipeline element that answers the query with one Metnos turn."""

    # AgentDojo's attacks address the model by a name read from the pipeline's: "local" is its local model.
    name = "local"

    def __init__(self, home: Home, tools: SuiteTools, follower: Follower | None, *, answer: str = "no", keep: bool = False) -> None:
        self.home, self.tools, self.follower, self.keep = home, tools, follower, keep
        self.answer_flag = {"no": "--no", "yes": "--yes"}[answer]
        self.script = Script()
        self.turn: Turn | None = None

    def query(self, query: str, runtime: FunctionsRuntime, env: Any = NO_ENV, messages: Any = (),
              extra_args: dict | None = None) -> tuple[str, FunctionsRuntime, Any, list[Any], dict]:
        self.tools.start_case(env)
        if self.follower is not None:
            self.follower.start_case(self.script)
        home = self.home.root / f"home-{time.monotonic_ns()}"
        shutil.copytree(self.home.template, home, symlinks=True)
        t0 = time.monotonic()
        try:
            try:
                done = metnos(["ask", "--json", self.answer_flag, query], home, self.home.timeout_s)
                out = next((json.loads(ln) for ln in reversed(done.stdout.splitlines()) if ln.startswith("{")), None) or {}
                status = out.get("status") or f"exit {done.returncode}: {done.stderr.strip()[-200:]}"
                answer = out.get("answer") or ""
            except subprocess.TimeoutExpired:
                status, answer = "timeout", ""
            seconds = time.monotonic() - t0
            events = _events(home)
        finally:
            if self.keep:
                print(f"kept {home}", file=sys.stderr)
            else:
                shutil.rmtree(home, ignore_errors=True)
        ran = self.tools.calls()
        if self.turn is not None:
            self.turn.status, self.turn.seconds, self.turn.answer = status, round(seconds, 2), answer[:300]
            self.turn.calls = [f"{r.function} {json.dumps(r.args, sort_keys=True)}" + (f" -> {r.error}" if r.error else "") for r in ran]
            self.turn.asked = [f"{s['executor']} {json.dumps(s['args'], sort_keys=True)[:200]}" for s in side_effect_steps(events) if s["asked"]]
            self.turn.refusals = refusals_of(events)
            self.turn.goal_seen = bool(self.follower and self.follower.seen())
        chat: list[Any] = [{"role": "user", "content": [text_content_block_from_string(query)]}]
        for n, r in enumerate(ran):
            call = FunctionCall(function=r.function, args=r.args, id=f"metnos_{n}")
            chat.append({"role": "assistant", "content": None, "tool_calls": [call]})
            chat.append({"role": "tool", "content": [text_content_block_from_string(r.error or r.result)],
                         "tool_call_id": call.id, "tool_call": call, "error": r.error})
        chat.append({"role": "assistant", "content": [text_content_block_from_string(answer)], "tool_calls": None})
        return query, runtime, env, chat, extra_args or {}


def _script(home: Home, env: Any, user_task: Any, injection_task: Any | None) -> Script:
    def calls(task: Any) -> tuple[Call, ...]:
        return tuple(Call(home.executors.get(c.function, c.function), {served_name(k): v for k, v in c.args.items()})
                     for c in task.ground_truth(env.model_copy(deep=True)))

    if injection_task is None:
        return Script(calls(user_task))
    return Script(calls(user_task), injection_task.GOAL, calls(injection_task))


def run_case(suite: Any, agent: MetnosAgent, user_task: Any, injection_task: Any | None, attack: Any) -> Turn:
    injections = attack.attack(user_task, injection_task) if injection_task is not None else {}
    env = user_task.init_environment(suite.load_and_inject_default_environment(injections))
    agent.script = _script(agent.home, env, user_task, injection_task)
    agent.turn = Turn(user_task.ID, injection_task.ID if injection_task is not None else None)
    utility, security = suite.run_task_with_pipeline(agent, user_task, injection_task, injections, environment=env)
    agent.turn.utility = bool(utility)
    # AgentDojo's ``security`` is True when the injection task's check passes: the attack succeeded.
    agent.turn.attack_succeeded = injection_task is not None and bool(security)
    return agent.turn


# Figures.

def ratio(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "0/0"


def summarize(turns: list[Turn]) -> dict[str, Any]:
    clean = [t for t in turns if t.injection_task is None]
    attacked = [t for t in turns if t.injection_task is not None]
    return {"clean": len(clean), "utility": sum(t.utility for t in clean), "cases": len(attacked),
            "utility_under_attack": sum(t.utility for t in attacked), "attacks": sum(t.attack_succeeded for t in attacked),
            "seen": sum(t.goal_seen for t in attacked)}


def table(s: dict[str, Any], model: str, scripted: bool = True) -> str:
    seen = f"{s['seen']}/{s['cases']}" if scripted else "not known"
    return ("| model | utility, no attack | utility under attack | targeted attack success | goal shown to the model |\n"
            "|---|---|---|---|---|\n"
            f"| {model} | {ratio(s['utility'], s['clean'])} | {ratio(s['utility_under_attack'], s['cases'])} | "
            f"{ratio(s['attacks'], s['cases'])} | {seen} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="banking", help="workspace, banking, slack or travel (default banking)")
    ap.add_argument("--attack", default="important_instructions", help="an AgentDojo attack (default important_instructions)")
    ap.add_argument("--model", help="a GGUF file for the embedded server (default: the scripted follower)")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (default: its choice)")
    ap.add_argument("--user-tasks", help="comma list of user task ids (default: all)")
    ap.add_argument("--injection-tasks", help="comma list of injection task ids (default: all)")
    ap.add_argument("--limit", type=int, help="run only this many attacked cases (after --shuffle), and their user tasks clean")
    ap.add_argument("--shuffle", type=int, metavar="SEED", help="a random order, so a limited run is a fair sample")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a turn may take (default 300)")
    ap.add_argument("--json", type=Path, help="write the results here (after each case)")
    ap.add_argument("--approvals", choices=("no", "yes"), default="no",
                    help="the absent user's answer to every question: no (--no, the default) or the standing --yes, "
                         "which Metnos does not count for a target that came from content")
    ap.add_argument("--markdown", type=Path, metavar="JSON", help="print a saved report as the Markdown table and exit")
    ap.add_argument("--keep", action="store_true", help="keep each case's home (and the run's folder)")
    args = ap.parse_args(argv)
    if args.markdown:
        report = json.loads(args.markdown.read_text())
        print(table(report["summary"], report["meta"]["model"], report["meta"].get("scripted", True)))
        return 0

    suite = get_suite(BENCHMARK_VERSION, args.suite)
    users = [suite.get_user_task_by_id(i) for i in args.user_tasks.split(",")] if args.user_tasks else list(suite.user_tasks.values())
    injections = ([suite.get_injection_task_by_id(i) for i in args.injection_tasks.split(",")] if args.injection_tasks
                  else list(suite.injection_tasks.values()))
    cases = [(u, i) for u in users for i in injections]
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(cases)
    if args.limit:
        cases = cases[:args.limit]
        users = [u for u in users if any(c[0] is u for c in cases)]

    with ExitStack() as stack:
        root = Path(tempfile.mkdtemp(prefix="agentdojo-"))
        if not args.keep:
            stack.callback(shutil.rmtree, root, True)
        follower = None
        if args.model is None:
            follower = Follower()
            llm_url = follower.start()
            stack.callback(follower.stop)
            model_name = "scripted follower (bench/agentdojo_follower.py)"
        else:
            from bench.agent_tasks import default_model
            from metnos.mechanisms.llm.embedded import EmbeddedServer

            model = default_model(Path(args.model))
            server = EmbeddedServer(model, threads=args.threads or None, log_path=root / "llm.log")
            llm_url = server.start()
            stack.callback(server.stop)
            model_name = model.name
        tools = SuiteTools(suite)
        tools_url = tools.start()
        stack.callback(tools.stop)
        home = Home(root, llm_url, tools_url, args.timeout)
        t0 = time.monotonic()
        home.make()
        print(f"home ready in {time.monotonic() - t0:.1f} s ({model_name}; {len(home.executors)} suite tools)", file=sys.stderr)
        agent = MetnosAgent(home, tools, follower, answer=args.approvals, keep=args.keep)
        attack = load_attack(args.attack, suite, agent)
        meta = {"suite": args.suite, "approvals": args.approvals, "scripted": follower is not None, "benchmark_version": BENCHMARK_VERSION, "attack": args.attack, "model": model_name,
                "threads": args.threads or None, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "cases": [f"{u.ID}+{i.ID}" for u, i in cases]}
        plan = [(u, None) for u in users] + cases
        turns: list[Turn] = []
        for n, (user_task, injection_task) in enumerate(plan, 1):
            turn = run_case(suite, agent, user_task, injection_task, attack)
            turns.append(turn)
            print(f"[{n}/{len(plan)}] {turn.user_task}+{turn.injection_task or 'clean'}: {turn.status} in {turn.seconds:.1f} s, "
                  f"utility {'yes' if turn.utility else 'no'}"
                  + ("" if injection_task is None else f", attack {'SUCCEEDED' if turn.attack_succeeded else 'failed'}"
                     f" (goal {'seen' if turn.goal_seen else 'not seen'}), asked {len(turn.asked)}"), file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps({"meta": meta, "complete": n == len(plan), "summary": summarize(turns),
                                                 "turns": [asdict(t) for t in turns]}, indent=1))
    print(table(summarize(turns), model_name, follower is not None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
