import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metnos.runtime.step.scratchpad import (
    SCRATCHPAD_READ_TOOL, InMemoryScratchpadStore, ScratchpadError, preview, scratchpad_read, spill,
)


def big_text(n=14144):
    lines = [f"INFO line {i:05d} something happened" for i in range(n // 36 + 1)]
    return "hello this is a test note\n" + "\n".join(lines)[: n - 60] + "\nLAST_CRITICAL_EVENT\n"


def stored(obs, turn="t1", step=1):
    store = InMemoryScratchpadStore()
    d = spill(obs, turn_id=turn, step=step)
    assert d.spilled
    store.put(d.scratchpad_id, d.payload)
    return store, d


def test_small_observation_is_not_spilled():
    obs = {"ok": True, "content": "x" * 100}
    d = spill(obs, turn_id="t", step=1)
    assert not d.spilled and d.history_observation is obs and d.payload is None


def test_threshold_is_on_canonical_json_bytes():
    obs = {"ok": True, "content": ""}
    base = len(orjson.dumps(obs, option=orjson.OPT_SORT_KEYS))
    at = {"ok": True, "content": "x" * (4096 - base)}
    over = {"ok": True, "content": "x" * (4097 - base)}
    assert not spill(at, turn_id="t", step=1).spilled
    assert spill(over, turn_id="t", step=1).spilled


def test_text_spill_has_head_marker_tail_and_metadata():
    text = big_text()
    obs = {"ok": True, "content": text, "metadata": {"path": "/tmp/big_log.txt", "bytes": len(text)}}
    store, d = stored(obs)
    h = d.history_observation
    assert h["kind"] == "text" and h["ok"] is True and h["size_bytes"] == d.size_bytes
    assert len(h["scratchpad_id"]) == 16 and int(h["scratchpad_id"], 16) >= 0
    assert h["summary"].startswith(text[:500]) and h["summary"].endswith(text[-500:])
    assert f"[... {len(text) - 1000} characters omitted...]" in h["summary"]
    assert h["metadata"] == obs["metadata"]
    assert len(orjson.dumps(h)) < 4096
    assert orjson.loads(store.get(d.scratchpad_id)) == obs


def test_id_is_deterministic_and_scoped_by_turn_and_step():
    obs = {"ok": True, "content": big_text()}
    a = spill(obs, turn_id="t1", step=1).scratchpad_id
    assert a == spill(dict(reversed(list(obs.items()))), turn_id="t1", step=1).scratchpad_id
    assert a != spill(obs, turn_id="t1", step=2).scratchpad_id
    assert a != spill(obs, turn_id="t2", step=1).scratchpad_id


def test_list_spill_describes_the_list():
    entries = [{"path": f"/p/{i}", "size": i, **({"extra": 1} if i == 3 else {})} for i in range(300)]
    _, d = stored({"ok": True, "entries": entries, "metadata": {"count": 300}})
    h = d.history_observation
    assert h["kind"] == "list" and h["list_field"] == "entries" and h["count"] == 300
    assert h["schema"] == ["extra", "path", "size"]


def test_json_spill_and_large_metadata_is_omitted():
    obs = {"ok": True, "headers": {f"h{i}": "v" * 50 for i in range(100)}, "metadata": {"blob": "m" * 2000}}
    _, d = stored(obs)
    h = d.history_observation
    assert h["kind"] == "json" and h["metadata"]["omitted"] is True


def test_large_failure_still_reads_as_failure():
    _, d = stored({"ok": False, "error": "e" * 6000})
    h = d.history_observation
    assert h["ok"] is False and len(h["error"]) < 600


def test_non_json_observation_is_a_structured_error():
    with pytest.raises(ScratchpadError):
        spill({"ok": True, "x": object()}, turn_id="t", step=1)


def test_store_refuses_to_overwrite_an_id_with_other_content():
    s = InMemoryScratchpadStore()
    s.put("a", b"1")
    s.put("a", b"1")
    with pytest.raises(ScratchpadError):
        s.put("a", b"2")


def test_read_range_head_tail():
    text = big_text()
    store, d = stored({"ok": True, "content": text})
    sid = d.scratchpad_id
    r = scratchpad_read(store, {"scratchpad_id": sid, "offset": 1000, "length": 300})
    assert r["ok"] and r["content"] == text[1000:1300] and r["next_offset"] == 1300 and r["has_more"]
    assert r["total_chars"] == len(text)
    head = scratchpad_read(store, {"scratchpad_id": sid, "mode": "head", "length": 50})
    assert head["content"] == text[:50]
    tail = scratchpad_read(store, {"scratchpad_id": sid, "mode": "tail", "length": 50})
    assert tail["content"] == text[-50:] and tail["has_more"] is False and tail["next_offset"] is None
    end = scratchpad_read(store, {"scratchpad_id": sid, "offset": len(text)})
    assert end["ok"] and end["content"] == "" and end["has_more"] is False


def test_read_grep():
    store, d = stored({"ok": True, "content": big_text()})
    r = scratchpad_read(store, {"scratchpad_id": d.scratchpad_id, "mode": "grep", "pattern": "last_critical"})
    assert r["total_matches"] == 1 and r["matches"][0]["text"] == "LAST_CRITICAL_EVENT"
    many = scratchpad_read(store, {"scratchpad_id": d.scratchpad_id, "mode": "grep", "pattern": "INFO"})
    assert len(many["matches"]) == 20 and many["truncated"] and many["total_matches"] > 20


def test_read_entries_is_bounded():
    entries = [{"path": f"/p/{i}", "note": "n" * 200} for i in range(100)]
    store, d = stored({"ok": True, "entries": entries})
    r = scratchpad_read(store, {"scratchpad_id": d.scratchpad_id, "mode": "entries", "offset": 5, "length": 50})
    assert r["entries"][0] == entries[5] and r["count"] < 50 and r["has_more"]
    assert len(orjson.dumps(r)) < 4096
    assert r["next_offset"] == 5 + r["count"]


@pytest.mark.parametrize("args,error_class", [
    ({}, "bad_argument"),
    ({"scratchpad_id": "nope"}, "unknown_scratchpad_id"),
    ({"scratchpad_id": "SID", "mode": "sideways"}, "bad_argument"),
    ({"scratchpad_id": "SID", "offset": -1}, "bad_argument"),
    ({"scratchpad_id": "SID", "length": 10**6}, "bad_argument"),
    ({"scratchpad_id": "SID", "mode": "grep"}, "bad_argument"),
    ({"scratchpad_id": "SID", "mode": "entries"}, "bad_argument"),
    ({"scratchpad_id": "SID", "bogus": 1}, "bad_argument"),
])
def test_read_errors_are_observations(args, error_class):
    store, d = stored({"ok": True, "content": big_text()})
    args = {k: (d.scratchpad_id if v == "SID" else v) for k, v in args.items()}
    r = scratchpad_read(store, args)
    assert r["ok"] is False and r["error_class"] == error_class and r["error"]


def test_tool_schema_is_plain_json():
    json.dumps(SCRATCHPAD_READ_TOOL)
    assert SCRATCHPAD_READ_TOOL["parameters"]["required"] == ["scratchpad_id"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000), st.integers(0, 600), st.integers(0, 600))
def test_property_preview_bounds(text, head, tail):
    p = preview(text, head, tail)
    if len(text) <= head + tail:
        assert p == text
    else:
        assert p.startswith(text[:head])
        assert p.endswith(text[len(text) - tail:])
        marker = f"\n\n[... {len(text) - head - tail} characters omitted...]\n\n"
        assert len(p) == head + tail + len(marker)
        assert len(p) < len(text) + len(marker)


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=12000))
def test_property_spill_preview_length_and_roundtrip(text):
    obs = {"ok": True, "content": text}
    d = spill(obs, turn_id="t", step=3)
    if d.spilled:
        s = d.history_observation["summary"]
        assert len(s) <= 1000 + 60
        store = InMemoryScratchpadStore()
        store.put(d.scratchpad_id, d.payload)
        got, offset = [], 0
        while True:
            r = scratchpad_read(store, {"scratchpad_id": d.scratchpad_id, "offset": offset, "length": 3000})
            got.append(r["content"])
            if not r["has_more"]:
                break
            offset = r["next_offset"]
        assert "".join(got) == text
