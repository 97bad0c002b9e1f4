"""Reading the model's drafts: the forms real small models reply in."""

from __future__ import annotations

import pytest

from metnos.runtime.synt.prompts import DraftProblem, parse_draft
from metnos.runtime.synt.static import check_draft

# What the real qwen2.5-coder 0.5B replied to the draft prompt (both files in one block).
ONE_BLOCK = '''```python
# main.py
def run(args, ctx):
    text = args["text"]
    return {"ok": True, "count": len(text.split())}

# tests/birth.py
def birth_counts(run, tmp):
    assert run({"text": "a b"})["count"] == 2
```'''


def test_both_files_in_one_block_are_cut_at_their_labels() -> None:
    files, declared = parse_draft(ONE_BLOCK)
    assert files["main.py"].startswith("def run(args, ctx):") and "birth" not in files["main.py"]
    assert files["tests/birth.py"].startswith("def birth_counts(run, tmp):")
    assert declared == {}


def test_two_blocks_and_a_capabilities_block() -> None:
    reply = ('```python\ndef run(args, ctx):\n    return {"ok": True}\n```\n'
             '```python\ndef birth_ok(run, tmp):\n    assert run({})["ok"]\n```\n'
             '```json\n{"capabilities": {"time:read": true}}\n```')
    files, declared = parse_draft(reply)
    assert set(files) == {"main.py", "tests/birth.py"} and declared == {"time:read": True}


@pytest.mark.parametrize("reply", ["no code at all", "```python\ndef birth_x(run, tmp):\n    pass\n```",
                                   "```python\n# main.py\nprint('no run here')\n# tests/birth.py\ndef birth_x(run, tmp):\n    pass\n```"])
def test_a_reply_without_both_files_is_a_draft_problem(reply: str) -> None:
    with pytest.raises(DraftProblem):
        parse_draft(reply)


def test_a_specification_is_normalised_where_small_models_slip() -> None:
    from metnos.runtime.synt.spec import normalise

    out = normalise({"name": "count_words", "input_schema": {"type": "string"},
                     "output_schema": {"type": "object", "required": ["ok", "error"], "properties": {"ok": {}, "error": {}}}})
    assert out["name"] == "compute_words"
    assert out["input_schema"] == {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
    assert out["output_schema"]["required"] == ["ok"]


def test_a_name_nothing_defines_is_a_static_problem_on_the_line_that_reads_it() -> None:
    # What the 1.5B drafted on a fresh install: the raise is on a path its birth test never takes.
    draft = ('def run(args, ctx):\n    text = args["text"]\n    if not isinstance(text, str):\n'
             '        raise InvalidInputError("Input must be a string.")\n    return {"ok": True, "count": len(text.split())}\n')
    [problem] = check_draft({"main.py": draft}, {})
    assert (problem.file, problem.line) == ("main.py", 4) and problem.what.startswith("InvalidInputError is used but never defined")
    fine = ("import json\nLIMIT = 3\n\n\nclass Bad(Exception):\n    pass\n\n\ndef run(args, ctx):\n    global SEEN\n    SEEN = 1\n"
            "    words = [w for w in args['text'].split() if w][:LIMIT]\n    if not words:\n        raise Bad(__name__)\n"
            "    return {'ok': True, 'words': json.dumps(words), 'seen': SEEN}\n")
    assert check_draft({"main.py": fine}, {}) == []
