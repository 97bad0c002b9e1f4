import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metnos.runtime.mnestome.hint import telos_hint
from metnos.runtime.step.vaglio import GuardPolicy, path_strings, resolve_path, vaglio

HOME = "/home/u"
WS = "/home/u/.local/share/metnos"
POLICY = GuardPolicy.core(HOME, workspace=WS, extra_forbidden=[WS + "/log", WS + "/keys"])


def v(name, args, intent="do it", **kw):
    return vaglio(name, args, intent_text=intent, policy=POLICY, **kw)


@pytest.mark.parametrize("name,args", [
    ("read_files", {"paths": ["~/.ssh/id_rsa"]}),
    ("read_files", {"path": "$HOME/.gnupg/pubring.kbx"}),
    ("read_files", {"path": "/home/u/.config/metnos/keys/k"}),
    ("read_files", {"path": "~/.config/myclaw"}),
    ("read_files", {"path": "/etc/passwd"}),
    ("read_files", {"path": "/etc/shadow"}),
    ("read_files", {"path": "file:///proc/self/environ"}),
    ("find_files", {"base_path": "/sys/class"}),
    ("read_files", {"path": "../../../.ssh/id_ed25519"}),
    ("read_files", {"path": "/home/u/notes/../.ssh/config"}),
    ("read_files", {"path": "//etc//passwd"}),
    ("write_files", {"path": WS + "/.audit/2026.jsonl", "content": "x"}),
    ("write_files", {"path": WS + "/log/data.mdb", "content": "x"}),
    ("classify_entries", {"entries": [{"path": "/home/u/.ssh/id_rsa", "size": 1}]}),
    ("write_files", {"path": "/etc/hosts", "content": "1.2.3.4 bank"}),
])
def test_guard_blocks_core_forbidden_paths(name, args):
    r = v(name, args)
    assert r.decision == "deny" and r.blocked_by == "guard" and r.score is None
    assert r.rules == ("guard:core_forbidden_path",)


@pytest.mark.parametrize("path", ["/etc/localtime", "/etc/ssl/certs/ca.pem", "/etc/resolv.conf"])
def test_innocuous_etc_files_are_readable_but_not_writable(path):
    assert v("read_files", {"path": path}).approved
    assert v("write_files", {"path": path, "content": "x"}).blocked_by == "guard"


def test_guard_allows_ordinary_paths_and_wide_reads():
    assert v("read_files", {"paths": ["~/notes/diary.md"]}).approved
    assert v("find_files", {"base_path": "~", "pattern": "*.jpg"}).approved
    assert v("find_files", {"base_path": "/"}).approved


@pytest.mark.parametrize("name,args", [
    ("delete_files", {"paths": ["~"]}),
    ("delete_files", {"paths": ["/"]}),
    ("move_files", {"src": "/home", "dst": "/tmp/h"}),
    ("delete_files", {"paths": ["~/.config"]}),  # contains ~/.config/metnos
    ("compress_files", {"paths": ["/usr"]}),
])
def test_guard_blocks_mass_harm(name, args):
    r = v(name, args)
    assert r.blocked_by == "guard" and r.rules == ("guard:no_mass_harm",)


def test_guard_blocks_private_key_exfiltration_but_not_reading_about_keys():
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn...\n-----END OPENSSH PRIVATE KEY-----"
    r = v("send_messages", {"messages": [{"to_user": "x", "body": key}]})
    assert r.rules == ("guard:no_secret_exfiltration",)
    assert v("extract_text", {"content": key}).approved


def test_text_arguments_are_not_paths():
    assert v("write_files", {"path": "~/notes/a.md", "content": "/etc/passwd is where users live"}).approved
    assert path_strings({"content": "~/.ssh", "query": "/etc"}) == []


def test_urls_are_not_paths():
    assert path_strings({"urls": ["https://x.org/etc/passwd"], "path": "http://a/b"}) == []


def test_resolve_path():
    assert resolve_path("~/a/../b", POLICY) == "/home/u/b"
    assert resolve_path("notes.txt", POLICY) == WS + "/notes.txt"
    assert resolve_path("$WORKSPACE/x", POLICY) == WS + "/x"
    assert resolve_path("//etc", POLICY) == "/etc"


def test_judge_base_bonus_and_penalties_are_exact():
    assert v("get_now", {}).score == 0.7
    assert v("get_now", {}, intent="please run get_now").score == 0.9
    assert v("read_files", {}, intent="Read files in my notes folder").score == 0.9
    assert v("read_files", {"path": "~/a/../b.txt"}).score == 0.4
    assert v("read_files", {"pa th": "x"}).score == 0.4
    r = v("read_files", {"path": "a/../b", "we!rd": 1})
    assert r.score == 0.1 and r.decision == "deny" and r.blocked_by == "judge"
    assert set(r.rules) == {"judge:dotdot_in_path", "judge:anomalous_arg_key"}


def test_threshold_is_inclusive_and_configurable():
    assert v("read_files", {"path": "a/../b"}, threshold=0.4).approved
    assert v("read_files", {"path": "a/../b"}, threshold=0.41).blocked_by == "judge"
    assert v("get_now", {}, threshold=0.0).approved


def test_precautionary_asymmetry_asks_unless_approved():
    r = v("send_messages", {"messages": [{"to_user": "l", "body": "hi"}]}, side_effects=True, idempotent=False)
    assert r.decision == "ask" and not r.approved and "approval" in r.reason
    assert v("send_messages", {"messages": [1]}, side_effects=True, idempotent=False,
             user_approved=True).approved
    assert v("write_files", {"path": "~/a", "content": "x"}, side_effects=True, idempotent=True).approved


def test_guard_wins_over_approval():
    r = v("send_messages", {"path": "~/.ssh/id_rsa"}, side_effects=True, idempotent=False, user_approved=True)
    assert r.blocked_by == "guard"


def test_verdict_json_records_keys_not_values():
    r = v("write_files", {"path": "~/secret-plan.md", "content": "the secret"}, ts="2026-04-27T10:00:00Z")
    data = r.to_json()
    assert data["args_keys"] == ["content", "path"]
    text = json.dumps(data)
    assert "secret" not in text
    assert set(data) == {"executor", "approved", "decision", "reason", "score", "blocked_by", "rules",
                         "args_keys", "judge_kind", "ts"}
    assert data["judge_kind"] == "rule" and data["ts"] == "2026-04-27T10:00:00Z"


def test_policy_validation():
    with pytest.raises(ValueError):
        GuardPolicy.core("relative/home")
    with pytest.raises(ValueError):
        GuardPolicy.core("/h", extra_forbidden=["rel"])


segments = st.lists(st.sampled_from(["a", "b", "..", ".", "notes", ".ssh", "", "etc"]), max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["~/", "/", "", "./", "/home/u/", "$HOME/"]), segments)
def test_property_no_spelling_reaches_ssh_unguarded(prefix, parts):
    raw = prefix + "/".join(parts)
    resolved = resolve_path(raw, POLICY)
    r = v("read_files", {"path": raw})
    if resolved == "/home/u/.ssh" or resolved.startswith("/home/u/.ssh/") or resolved.startswith("/etc"):
        assert r.blocked_by == "guard"
    assert resolved.startswith("/") and "/../" not in resolved + "/"


HINT = {"mnest": "m1", "from": "find_files", "weight": 0.45, "uses": 2}


def test_a_strong_mnest_is_a_hint_in_the_reason_that_moves_no_score_or_decision():
    plain = v("describe_entries", {"from_step": 1})
    hinted = v("describe_entries", {"from_step": 1}, mnest_hint=HINT)
    assert (hinted.decision, hinted.score) == (plain.decision, plain.score)
    assert hinted.reason == ("approved; a strong mnest from find_files (weight 0.45, 2 uses) leads to describe_entries: "
                             "a hint of telos alignment")
    assert hinted.rules == (*plain.rules, "judge:mnest_hint") and hinted.to_json()["mnest_hint"] == HINT
    # A verdict without a hint keeps the shape recorded before hints existed.
    assert "mnest_hint" not in plain.to_json()
    asked = v("send_messages", {"messages": []}, side_effects=True, idempotent=False, mnest_hint=HINT)
    assert asked.decision == "ask" and "hint of telos alignment" in asked.reason
    # A guard stop is no judgement: the hint is not recorded there.
    blocked = v("read_files", {"path": "/etc/passwd"}, mnest_hint=HINT)
    assert blocked.blocked_by == "guard" and "mnest_hint" not in blocked.to_json()


def _mnest(mid, src, dst, weight, uses=3, origin="observed", state="active"):
    return mid, {"id": mid, "src_executor": src, "dst_executor": dst, "weight": weight, "uses": uses, "origin": origin, "state": state}


def test_the_hint_is_the_strongest_walked_mnest_from_what_the_turn_ran():
    state = {"mnests": dict([
        _mnest("a", "find_files", "describe_entries", 0.5),
        _mnest("b", "read_files", "describe_entries", 0.8),
        _mnest("c", "list_dir", "describe_entries", 0.9, state="proto"),
        _mnest("d", "get_now", "describe_entries", 0.95, uses=1, origin="seed"),
        _mnest("e", "get_urls", "describe_entries", 0.1),
    ])}
    assert telos_hint(state, "describe_entries", ["find_files", "read_files"]) == {"mnest": "b", "from": "read_files", "weight": 0.8, "uses": 3}
    assert telos_hint(state, "describe_entries", ["find_files"])["mnest"] == "a"
    # Unwalked seed, proto and weak mnests are no hint.
    assert telos_hint(state, "describe_entries", ["list_dir", "get_now", "get_urls"]) is None
    assert telos_hint(state, "describe_entries", []) is None


def test_the_llm_judge_is_told_the_users_habit_when_a_strong_mnest_hints():
    from metnos.runtime.turn.judge import judge_message

    args = {"from_step": 1}
    plain = judge_message("describe what you found", "describe_entries", args, v("describe_entries", args))
    told = judge_message("describe what you found", "describe_entries", args, v("describe_entries", args, mnest_hint=HINT))
    habit = ("\nFrom the user's history: after find_files, describe_entries has followed 2 times "
             "(a strong habit; a hint that the call fits what the user wants, not a proof).")
    assert told == plain + habit
    assert plain == 'User\'s request: describe what you found\nProposed call: {"arguments":{"from_step":1},"tool":"describe_entries"}'
    # A guard stop carries no hint, so neither does what the judge would be asked.
    blocked = v("read_files", {"path": "/etc/passwd"}, mnest_hint=HINT)
    assert "user's history" not in judge_message("read it", "read_files", {"path": "/etc/passwd"}, blocked)
