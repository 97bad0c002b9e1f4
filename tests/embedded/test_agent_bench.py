"""Issue 17 item 1 in CI: the agent benchmark's slice runs end to end on the embedded model.

Not a pass-rate threshold (a 0.5B model's pass rate is what the benchmark is
for, not what CI gates on): the bench must start the model server, run every
task of the slice on Metnos and on the plain loop, check each, and write a
report whose figures add up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.agent_suite import SLICE
from tests.support.embedded import embedded_model_or_skip

pytestmark = [pytest.mark.embedded, pytest.mark.timeout(3600)]
REPO = Path(__file__).resolve().parents[2]


def test_the_slice_runs_end_to_end_and_writes_a_valid_report(tmp_path: Path) -> None:
    model = embedded_model_or_skip()
    out = tmp_path / "agent-slice.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "agent_tasks.py"), "--model", str(model), "--slice",
         "--systems", "metnos,plain", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=3500, env={**_env(), "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["complete"] is True
    assert report["model_file"] == model.name
    assert report["tasks"] == [t for t in report["tasks"] if t in SLICE] and len(report["tasks"]) == len(SLICE)
    runs = report["runs"]
    assert {(r["task"], r["system"]) for r in runs} == {(t, s) for t in SLICE for s in ("metnos", "plain")}
    for r in runs:
        assert not r["status"].startswith("bench-error"), r
        assert isinstance(r["passed"], bool) and r["seconds"] > 0 and r["steps"] >= 0 and r["prompt_tokens"] >= 0
    for system in ("metnos", "plain"):
        mine = [r for r in runs if r["system"] == system]
        summary = report["summary"][system]
        assert summary["tasks"] == len(SLICE) and summary["passed"] == sum(r["passed"] for r in mine)
        assert summary["total_prompt_tokens"] == sum(r["prompt_tokens"] for r in mine) > 0
    # The side-by-side table reached stdout.
    assert "pass rate" in proc.stdout and "metnos" in proc.stdout and "plain" in proc.stdout


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("METNOS_")}
