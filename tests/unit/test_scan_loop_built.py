"""The full scan runs its compiled loop where the install built it (setup.py, _scan_loop.pyx)."""

from __future__ import annotations

from metnos.mechanisms.store import event_scan
from tests.contract.scan_loops import skip_unless_compiled


def test_the_scan_runs_the_compiled_loop_where_it_was_built() -> None:
    skip_unless_compiled()
    assert event_scan.compiled_loop()
    assert event_scan._batch_loop is event_scan._compiled_events_batch
