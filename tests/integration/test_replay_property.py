"""Property: any turn the loop records replays clean from the log.

Turns are generated (model replies, observations, approvals), run through the
real loop into a real LMDB log, then replayed with the real replayer.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metnos
from metnos.mechanisms.llm.errors import ProviderUnreachable
from metnos.mechanisms.llm.messages import LLMReply, ToolCall
from metnos.runtime.turn.loop import TurnLoop, TurnRequest
from metnos.runtime.turn.session import LogSink, guard_policy, policy_checker, turn_catalogue
from metnos.settings import load_turn_settings
from replay.replayer import Replayer
from tests.support.turn_ports import InProcessPorts
from tests.support.workspace_template import initialise


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory):
    import os

    from metnos.runtime.booted import Runtime

    root = tmp_path_factory.mktemp("prop")
    saved = {k: os.environ.get(k) for k in ("METNOS_HOME", "HOME")}
    os.environ["METNOS_HOME"] = str(root / "home")
    os.environ["HOME"] = str(root / "user")
    (root / "user").mkdir()
    initialise(os.environ)
    rt = Runtime.boot(birth=False)
    yield rt
    rt.close()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


class GeneratedPorts(InProcessPorts):
    tick = timedelta(milliseconds=7)
    caller = "test"

    def __init__(self, runtime, replies, observations, approvals) -> None:
        super().__init__(runtime)
        self.replies = list(replies)
        self.observations = list(observations)
        self.approvals = list(approvals)

    def ask_llm(self, tier, messages, tools, *, tool_choice="auto", constraint=None):
        if not self.replies:
            return LLMReply(text="done", tool_calls=(), call_form="none", raw={})
        reply = self.replies.pop(0)
        if reply == "down":
            raise ProviderUnreachable("http://127.0.0.1:9", "connection refused")
        return reply

    def observe(self, name, args, step):
        return self.observations.pop(0) if self.observations else {"ok": True}

    def approve(self, step, executor, args, reason):
        return (self.approvals.pop(0) if self.approvals else False), "generated"


words = st.text(alphabet="abcdefghij ", min_size=1, max_size=12)
entry = st.fixed_dictionaries({"name": words, "size": st.integers(0, 10**6)})
observation = st.one_of(
    st.fixed_dictionaries({"ok": st.just(True), "entries": st.lists(entry, max_size=4)}),
    st.fixed_dictionaries({"ok": st.just(True), "content": st.text(max_size=40)}),
    st.fixed_dictionaries({"ok": st.just(True), "content": st.text(min_size=5000, max_size=6000)}),
    st.fixed_dictionaries({"ok": st.just(False), "error": st.fixed_dictionaries({"class": st.just("NotFound"), "message": words})}),
)
tool_call = st.one_of(
    st.builds(lambda p: ("read_files", {"paths": [f"~/{p.strip() or 'x'}.md"]}), words),
    st.just(("get_now", {})),
    st.builds(lambda p: ("find_files", {"base_path": "~", "pattern": p.strip() or "*"}), words),
    st.builds(lambda n: ("describe_entries", {"from_step": n}), st.integers(1, 4)),
    st.builds(lambda n: ("sort_entries", {"from_step": n, "by": "size"}), st.integers(1, 4)),
    st.builds(lambda p: ("write_files", {"files": [{"path": f"~/{p.strip() or 'x'}.txt", "content": "{{step1.content}}"}]}), words),
    st.just(("no_such_executor", {"from_step": 1})),
    st.just(("list_recurring", {})),
    st.just(("read_files", {"paths": 3})),
)
reply = st.one_of(
    st.builds(lambda c: LLMReply(text="", tool_calls=(ToolCall(f"call_{abs(hash(str(c))) % 999}", c[0], c[1]),), call_form="native", raw={}), tool_call),
    st.builds(lambda t: LLMReply(text=t, tool_calls=(), call_form="none", raw={}), words),
    st.just("down"),
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(replies=st.lists(reply, min_size=1, max_size=6), observations=st.lists(observation, max_size=6), approvals=st.lists(st.booleans(), max_size=3))
def test_every_generated_turn_replays_clean(runtime, replies, observations, approvals) -> None:
    env = {"HOME": str(Path.home()), "METNOS_CAP_STEPS": "5"}
    ports = GeneratedPorts(runtime, replies, observations, approvals)
    loop = TurnLoop(
        ports=ports, catalogue=turn_catalogue(runtime), settings=load_turn_settings(env), policy=guard_policy(runtime, env),
        sink=LogSink(runtime), runtime_version=metnos.__version__, check_policy=policy_checker(runtime, env),
    )
    outcome = loop.run(TurnRequest(text="read find sort describe write files now"))
    result = Replayer(runtime, env=env).replay(outcome.turn_id)
    assert result.same_path, result.divergence
