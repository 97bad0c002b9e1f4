"""``[runtime]`` of config.toml: the planner's mode, the autonomy level, the
hybrid escalation rules and the LLM judge (seeds/002 ch. 3, 4, 9.2).

    [runtime]
    mode = "local"            # local | online | hybrid
    online_tier = "wise"      # the tier that plans in online mode
    proposer_tier = "wise"    # the tier the step-by-step proposer starts on
    escalate_tiers = true     # after a failed step, the proposer moves to the next distinct tier up
    escalate_to_frontier = false   # ... and may reach the frontier tier

    autonomy = "supervised"   # read_only | supervised | full
    intent = "rules"          # rules | model: the intent extractor (middle tier) names the executors a request needs
    fillers = true            # an online plan may leave ${FILLER: ...} for the fast tier to write once its steps ran
    summarise_spills = false  # the scratchpad summariser (fast tier) writes a gist of each spilled observation

    [runtime.prompts]         # added to a role's system prompt
    proposer = "Answer in Italian."

    [runtime.hybrid]          # when a hybrid turn leaves the local loop for one online plan
    online_tier = "frontier"  # the tier that plans online (frontier, or wise for a bigger local model)
    critical = ["send_messages", "network"]   # executors or capabilities that escalate at once
    on_local_failure = true   # the local loop failed a step, or its answer was unusable
    on_cap = true             # the local loop hit a cap
    marker = "!online"        # a request that starts with it asks for online

    [runtime.judge]           # the LLM judge of the vaglio, beside the rule judge
    enabled = false
    tier = "middle"
    threshold = 0.5           # a score under it refuses the step
    capabilities = []         # judge only executors holding one of these (fs:write, network, ...); empty: every side effect

``ask --mode`` and ``ask --autonomy`` override the first two for one turn, and
``ask --set KEY=VALUE`` any key (``intent=model``, ``judge.enabled=true``,
``fillers=false``), its VALUE read as in config.toml.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metnos.settings import autonomy
from metnos.settings.declare import reason_of, setting
from metnos.settings.errors import AutonomyError, ConfigError

MODES = ("local", "online", "hybrid")
Tier = Literal["fast", "middle", "wise", "frontier"]


class HybridConfig(BaseModel):
    """``[runtime.hybrid]``: when a hybrid turn leaves the local loop for one online plan."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    online_tier: Tier = setting("frontier", "The tier that plans online (frontier, or wise for a bigger local model).")
    critical: tuple[str, ...] = setting((), "Executors or capabilities that escalate at once.")
    on_local_failure: bool = setting(True, "Escalate when the local loop failed a step, or its answer was unusable.")
    on_cap: bool = setting(True, "Escalate when the local loop hit a cap.")
    marker: str = setting("!online", "A request that starts with it asks for online.", min_length=1, max_length=40)


class JudgeConfig(BaseModel):
    """``[runtime.judge]``: the LLM judge of the vaglio, beside the rule judge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = setting(False, "Ask the LLM judge about each step with side effects.")
    tier: Tier = setting("middle", "The tier the judge runs on.")
    threshold: float = setting(0.5, "A score under it refuses the step (0.0-1.0).", ge=0.0, le=1.0, allow_inf_nan=False)
    capabilities: tuple[str, ...] = setting((), "Judge only executors holding one of these (fs:write, network, ...); "
                                                "empty: every side effect.")


class RuntimeConfig(BaseModel):
    """``[runtime]``: the planner's mode, the autonomy level, the roles beside the proposer (docs/modes.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["local", "online", "hybrid"] = setting("local", "How a turn plans: local, online or hybrid.",
                                                         flag="--mode", dest="mode")
    # The tier that plans in online mode (a hybrid escalation uses [runtime.hybrid] online_tier).
    online_tier: Tier = setting("wise", "The tier that plans in online mode.")
    # The tier the local proposer starts on, and whether a failed step moves it up to the next distinct tier.
    proposer_tier: Tier = setting("wise", "The tier the step-by-step proposer starts on.")
    escalate_tiers: bool = setting(True, "After a failed step, the proposer moves to the next distinct tier up.")
    escalate_to_frontier: bool = setting(False, "... and may reach the frontier tier.")
    # The distinct tiers, lowest first (filled by the session from [llm.tiers.*]; recorded so replay climbs alike).
    tier_ladder: tuple[str, ...] = setting((), "Filled by Metnos from [llm.tiers.*] (the tiers a proposer climbs); "
                                               "recorded with each turn, not set by hand.")
    # Text added to a role's system prompt.
    prompts: dict[Literal["proposer", "online", "judge", "intent", "filler", "summariser"], str] = setting(
        description="`[runtime.prompts]`: text added to a role's system prompt (proposer, online, judge, intent, filler, "
                    "summariser).", default_factory=dict)
    autonomy: str = setting(autonomy.DEFAULT, "How far a turn may go: read_only, supervised or full.",
                            flag="--autonomy", dest="autonomy")
    # The roles beside the proposer (seeds/002 ch. 4), on the tiers ROLE_TIERS gives them.
    intent: Literal["rules", "model"] = setting("rules", "rules, or model: the intent extractor (middle tier) names "
                                                         "the executors a request needs.")
    fillers: bool = setting(True, "An online plan may leave ${FILLER: ...} for the fast tier to write once its steps ran.")
    mnest_hint: bool = setting(True, "The vaglio reads the mnestome: a strong mnest to the executor from one the turn "
                                     "ran is recorded in the verdict's reason as a hint of telos alignment.")
    unasked_options: bool = setting(True, "A turn's first call keeps none of the optional values the model wrote as words "
                                          "the request never gave (a sender, a title's words, a zone): the tool's default holds.")
    unasked_end: bool = setting(True, "A schedule stops only where the request says it does: an expiry, or a number of "
                                      "firings for a recurring request, that the request gives no end for is left out.")
    done_is_ok: bool = setting(True, "An action not done a second time is told to the model as done (ok), at the step "
                                     "that did it: told it failed, the 1.5B answered that it could not be done.")
    schedule_closes_turn: bool = setting(True, "The one schedule a request asks for, once made, ends the turn's calls: "
                                               "the next round asks for words.")
    grounding_reads_told: bool = setting(True, "An answer may give what the turn told the model beside the executors' "
                                               "results (a builtin's: a schedule's next firing; an action not done twice): "
                                               "the grounding check reads it.")
    done_not_denied: bool = setting(True, "A model that repeated an action already done, and then said it could not be "
                                          "done, is answered with what the action reported, not failed.")
    done_not_denied_once: bool = setting(True, "A request whose actions all went through, with no step gone wrong, is "
                                               "answered with what they reported when the model then says it could not be "
                                               "done, the first time too (not only after it repeated one).")
    grounding_whole_asks: bool = setting(True, "An answer gives what a request for a whole asks: a total is not one "
                                               "entry's number of several, and links asked for are given as addresses.")
    grounding_after_loop: bool = setting(True, "An answer the model gives once stopped for repeating itself must name something "
                                               "the steps found: one that names nothing (\"nothing changed\", with no step that "
                                               "looked) is not answered.")
    grounding_quoted_names: bool = setting(True, "A tool's name in quotes in an answer (the tool \"write_files\") is the turn's "
                                                 "own, as it is unquoted, not a claim about the data.")
    grounding_verdicts: bool = setting(True, "An answer's yes or no must agree with a step's own verdict on what the request "
                                             "asks (read_events's is_free for \"am I free\"): one that says the opposite is "
                                             "sent back, then not answered.")
    grounding_verdict_words: bool = setting(True, "A verdict is asked in any language its executor's output schema names "
                                                  "words for (\"libero\" asks is_free), and an answer's \"no\" or \"si\" is one "
                                                  "only standing alone (\"No meeting then\" opens with no verdict).")
    grounding_names: bool = setting(True, "An answer given with no step taken names no town, person or day the request "
                                          "did not (a capitalised word that opens no sentence): the 0.5B answered where the "
                                          "user is without looking.")
    grounding_named_data: bool = setting(True, "An answer is held to the data the request names that a step read: a value a "
                                               "local step read (the clock) alone is no answer about it, nor is the page's own "
                                               "address an answer for the links on it.")
    grounding_picks_named: bool = setting(True, "An answer to a request for which file is the newest, the largest ... names one "
                                                "of the files the last listing gave, not only its date or size.")
    data_asked_for: bool = setting(True, "An answer Metnos makes from the data of the steps is given only when the steps ran "
                                         "what the request's own words rank first, or gave the data: a folder's listing does "
                                         "not answer what changed in it when nothing ran git.")
    refusal_retried_after_step: bool = setting(True, "A call refused for a step the turn had not taken yet (a delete of the "
                                                     "largest before a sort) is judged again once a step has worked since, "
                                                     "not barred as a repeated failure.")
    refused_call_repeated: bool = setting(True, "A call the vaglio or the user refused, proposed again word for word, is "
                                                "intercepted as a repeated failure: not judged, nor the user asked, again.")
    named_action_done: bool = setting(True, "A request that names an action (move, delete, send) is answered only once that "
                                            "action went through: another that did, after it failed, does not answer it. A "
                                            "model that reads again instead of acting is told to call that action.")
    requested_destination: bool = setting(True, "A move goes into the folder the request names as where it goes (\"into "
                                                "~/photos/2024\"): a call that puts a file anywhere else is refused before it runs.")
    held_data_after_detour: bool = setting(True, "A request that changes nothing, whose data a step read and the model was told "
                                                 "was there, is answered from that data when the model then called another tool "
                                                 "that failed or was refused: the detour changed nothing, the data still answers.")
    schedule_carries_reads: bool = setting(True, "A schedule whose arguments hold a line a step of the turn read, inside a "
                                                 "text the model wrote around it, is refused as the copy read today: the "
                                                 "reading goes into the schedule, as a chain that reads at each firing.")
    schedule_reads_named_sources: bool = setting(True, "A schedule for a request that names what to read (a file, a "
                                                       "folder, a page) reads it at each firing: one whose arguments name "
                                                       "none of it is refused, and the model told to give a chain that reads.")
    day_from_request: bool = setting(True, "A read that takes the day asked about, called without any day, is given the "
                                           "one day the request names (\"Thursday afternoon\"), in its words.")
    repeat_as_proposed: bool = setting(True, "A call is known again by the arguments the model wrote, not those a rule "
                                             "trimmed: the same refused call proposed again is intercepted as a repeat.")
    held_data_after_failed_step: bool = setting(True, "With held_data_after_detour: a step that failed before the model "
                                                      "read the data again (a slice, say) does not keep that data from "
                                                      "answering, unless the failed step is one the request's words ask for.")
    held_data_words_served: bool = setting(True, "With held_data_after_detour: when the data held is that of a tool the "
                                                 "request's words rank first, a detour to another they rank as high (a "
                                                 "page beside a file, both \"read\") does not keep that data from answering.")
    repeated_answer_sent_back: bool = setting(True, "An answer that is mostly one sentence said again and again, more "
                                                    "often than any data holds it (a small model's runaway to its token "
                                                    "limit), is no answer: it is sent back once, then the turn fails.")
    grounding_slice_end: bool = setting(True, "An answer to \"the last (first) N lines\" quotes no line of a text the turn "
                                              "read whole that is not among its last (first) N: a slice from the wrong end "
                                              "is still a step's result.")
    grounding_whole_lists: bool = setting(True, "An answer to \"the newest\", \"the largest\" or \"the last N\" stands only on "
                                                "a step that worked it out of a list no limit cut (metadata.truncated): "
                                                "the newest of the one file a listing kept is not the folder's newest.")
    grounding_whole_counts: bool = setting(True, "An answer to \"how many\" stands only on a list no limit cut (metadata.truncated, "
                                                 "a read's truncated): a listing that kept five files of twelve counts five.")
    empty_list_excuses_takers: bool = setting(True, "A request for an action answered after a step found an empty list "
                                                    "is excused only when the action takes what was found (a move, a "
                                                    "delete): an append or a send still has something to do.")
    runtime_hints_echoed: bool = setting(True, "An answer that is mostly the words the runtime put in a step's place (an "
                                               "intercepted or refused call's message and hint, \"the data is at step 1: "
                                               "call write_files now\") is no answer: it is sent back once, then the turn fails.")
    name_conditions: bool = setting(True, "A move or a delete takes only the files whose names meet what the request says "
                                          "of them (\"whose name starts with draft_\"): the others are taken out of the call.")
    summarise_spills: bool = setting(False, "The scratchpad summariser (fast tier) writes a gist of each spilled observation.")
    hybrid: HybridConfig = Field(default_factory=HybridConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)

    @field_validator("autonomy", mode="before")
    @classmethod
    def _level(cls, v: Any) -> str:
        try:
            return autonomy.parse_level(v, source="autonomy")
        except AutonomyError:
            raise ValueError(f"{v!r} is not an autonomy level (read_only, supervised or full)") from None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def system_prompt(self, role: str, base: str) -> str:
        """The role's built-in prompt, and the user's words for that role after it."""
        added = self.prompts.get(role, "").strip()  # type: ignore[call-overload]
        return f"{base.rstrip()}\n{added}\n" if added else base

    def tier_above(self, tier: str) -> str | None:
        """Where a failing proposer moves: the next distinct tier of the ladder, if escalation is on."""
        if not self.escalate_tiers or tier not in self.tier_ladder:
            return None
        at = self.tier_ladder.index(tier)
        return self.tier_ladder[at + 1] if at + 1 < len(self.tier_ladder) else None


# What a [runtime] recorded before a role existed ran without: replay reads it so.
RECORDED_BEFORE_ROLES: dict[str, Any] = {"fillers": False, "mnest_hint": False, "unasked_options": False, "schedule_closes_turn": False,
                                         "grounding_reads_told": False, "unasked_end": False, "done_is_ok": False,
                                         "grounding_whole_asks": False, "done_not_denied": False,
                                         "grounding_after_loop": False, "grounding_quoted_names": False,
                                         "data_asked_for": False, "name_conditions": False, "refusal_retried_after_step": False,
                                         "grounding_verdicts": False, "grounding_verdict_words": False,
                                         "grounding_names": False, "grounding_named_data": False,
                                         "refused_call_repeated": False, "named_action_done": False,
                                         "grounding_picks_named": False, "requested_destination": False,
                                         "held_data_after_detour": False, "done_not_denied_once": False,
                                         "schedule_carries_reads": False, "day_from_request": False,
                                         "repeat_as_proposed": False, "held_data_after_failed_step": False,
                                         "held_data_words_served": False, "repeated_answer_sent_back": False,
                                         "grounding_slice_end": False, "empty_list_excuses_takers": False,
                                         "runtime_hints_echoed": False, "schedule_reads_named_sources": False,
                                         "grounding_whole_lists": False, "grounding_whole_counts": False}


def recorded_runtime(runtime: dict[str, Any] | None) -> RuntimeConfig:
    """The [runtime] a turn recorded, as it ran."""
    return RuntimeConfig.model_validate({**RECORDED_BEFORE_ROLES, **(runtime or {})})


def set_items(section: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``section`` (a ``[runtime]`` table) with each ``KEY=VALUE`` of ``overrides`` set over it, a dotted
    KEY for a sub-table, VALUE read as in config.toml (a bare word is a string)."""
    out = copy.deepcopy(dict(section))
    for item in overrides:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--set {item!r}: write it KEY=VALUE, e.g. intent=model")
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()  # a bare word is a string, as a user would mean it
        *tables, last = key.strip().split(".")
        at = out
        for table in tables:
            at = at.setdefault(table, {})
            if not isinstance(at, dict):
                raise ConfigError(f"--set {item!r}: {table} is not a table")
        at[last] = value
    return out


def runtime_for_turn(base: RuntimeConfig, overrides: Sequence[str] = (), *, where: str = "config.toml") -> RuntimeConfig:
    """The ``[runtime]`` in force (``base``, as the loader read it) with one turn's ``--set`` items over it;
    a bad one is a ConfigError naming it as config.toml's own would be."""
    if not overrides:
        return base
    section = set_items(base.model_dump(exclude_defaults=True), overrides)
    try:
        return RuntimeConfig.model_validate(section)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{where} with --set {', '.join(overrides)}: [runtime] {key}: {reason_of(RuntimeConfig, err)}") from None


__all__ = ["MODES", "RECORDED_BEFORE_ROLES", "HybridConfig", "JudgeConfig", "RuntimeConfig",
           "recorded_runtime", "runtime_for_turn", "set_items"]
