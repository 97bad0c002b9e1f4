"""The contract each planner builtin declares for the vaglio, and the default for one that does not."""

from __future__ import annotations

from metnos.runtime.step.schedule_tools import TOOLS, BuiltinTool
from metnos.runtime.step.vaglio import ALLOW, ASK, GuardPolicy, vaglio

POLICY = GuardPolicy.core("/home/u")


def decision(tool: BuiltinTool) -> str:
    return vaglio(tool.name, {}, intent_text="", policy=POLICY, side_effects=tool.side_effects, idempotent=tool.idempotent).decision


def test_a_builtin_that_declares_nothing_asks() -> None:
    undeclared = BuiltinTool("new_thing", "does something", {"type": "object"}, lambda s, a, _=None: {"ok": True})
    assert (undeclared.side_effects, undeclared.idempotent) == (True, False)
    assert decision(undeclared) == ASK


def test_reads_pass_cancel_asks_and_a_schedule_is_judged_by_its_targets() -> None:
    for name in ("list_recurring", "show_recurring", "history_recurring"):
        assert TOOLS[name].side_effects is False and decision(TOOLS[name]) == ALLOW, name
    assert decision(TOOLS["cancel_recurring"]) == ASK
    assert decision(TOOLS["schedule_recurring"]) == ALLOW  # the targets decide
    assert TOOLS["schedule_recurring"].targets({"executor": "delete_files", "args": {"paths": ["/x"]}, "cron": "* * * * *"}) == [
        ("delete_files", {"paths": ["/x"]})]
    chain = {"chain": [{"executor": "find_files", "args": {"root": "~"}}, {"executor": "delete_files", "args": {"from_step": 1}}],
             "args": {"pattern": "*.tmp"}, "cron": "* * * * *"}
    assert [name for name, _ in TOOLS["schedule_recurring"].targets(chain)] == ["find_files", "delete_files"]
