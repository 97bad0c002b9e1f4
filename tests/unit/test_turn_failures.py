import json

import pytest

from metnos.runtime.turn.failures import (
    FailureKind, executor_crashed, non_json_output, turn_failure, unknown_executor,
)


@pytest.mark.parametrize("kind,final_kind", [
    (FailureKind.PROVIDER_UNREACHABLE, "error"), (FailureKind.EMPTY_CATALOGUE, "error"),
    (FailureKind.CAP_STEPS, "cap_steps"), (FailureKind.CAP_SAME_EXECUTOR, "cap_same_executor"),
    (FailureKind.BAD_LLM_REPLY, "error"), (FailureKind.NEEDS_INPUTS, "needs_inputs"),
    (FailureKind.INTERNAL_ERROR, "error"),
])
def test_every_kind_has_a_final_kind_and_a_one_line_message(kind, final_kind):
    f = turn_failure(kind, "multi\nline   detail")
    assert f.final_kind == final_kind
    assert "\n" not in f.message and f.message
    data = json.loads(json.dumps(f.to_json()))
    assert data["kind"] == kind.value


def test_the_spec_messages():
    assert turn_failure(FailureKind.EMPTY_CATALOGUE).message == "(empty catalog)"
    m = turn_failure(FailureKind.PROVIDER_UNREACHABLE, "connection refused to 127.0.0.1:8080").message
    assert "unreachable" in m and "connection refused" in m


def test_detail_is_bounded():
    f = turn_failure(FailureKind.INTERNAL_ERROR, "x" * 10_000)
    assert len(f.message) < 300


def test_kind_must_be_a_member():
    with pytest.raises(TypeError):
        turn_failure("cap_steps")  # type: ignore[arg-type]


def test_executor_observations():
    c = executor_crashed("", "Traceback ...\nZeroDivisionError" + "y" * 5000)
    assert c["ok"] is False and c["error"].startswith("non-JSON output: (empty); stderr: Traceback")
    assert len(c["error"]) < 1100
    n = non_json_output("hello")
    assert n == {"ok": False, "error_class": "non_json_output", "error": "non-JSON output",
                 "stdout_excerpt": "hello"}
    u = unknown_executor("frob_x", ["write_files", "read_files"])
    assert u["error"] == "nonexistent executor: frob_x" and u["available"] == ["read_files", "write_files"]
