ROWS = [{"size": 10}, {"size": 32}, {"size": "8"}, {"size": "n/a"}, {"size": True}, {"other": 1}]


def birth_sum_average_min_max(run, tmp):
    out = run({"op": "sum", "field": "size", "entries": ROWS})
    assert out["ok"] and out["content"] == 50, out
    assert out["metadata"]["count_used"] == 3 and out["metadata"]["count_skipped"] == 3
    assert abs(run({"op": "average", "field": "size", "entries": ROWS})["content"] - 50 / 3) < 1e-9
    assert run({"op": "min", "field": "size", "entries": ROWS})["content"] == 8
    assert run({"op": "max", "field": "size", "entries": ROWS})["content"] == 32


def birth_count(run, tmp):
    assert run({"op": "count", "entries": ROWS})["content"] == 6
    assert run({"op": "count", "field": "size", "entries": ROWS})["content"] == 5
    assert run({"op": "count", "entries": []})["content"] == 0
    wrong = run({"op": "count", "field": "lines", "entries": [{"line": "- milk", "number": 1}]})
    assert wrong["error"]["class"] == "NoField", wrong
    assert "'line'" in wrong["error"]["message"], wrong


def birth_text_min_max(run, tmp):
    dates = [{"d": "2026-05-04"}, {"d": "2025-12-31"}, {"d": "2026-01-15"}]
    assert run({"op": "min", "field": "d", "entries": dates})["content"] == "2025-12-31"
    assert run({"op": "max", "field": "d", "entries": dates})["content"] == "2026-05-04"


def birth_errors(run, tmp):
    assert run({"op": "sum", "entries": ROWS})["error"]["class"] == "NoField"
    assert run({"op": "average", "field": "size", "entries": []})["error"]["class"] == "NoValues"
    assert run({"op": "sum", "field": "d", "entries": [{"d": "x"}]})["error"]["class"] == "NoValues"
