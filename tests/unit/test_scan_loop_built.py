"""The full scan runs its compiled loop where the install built it (setup.py, _scan_loop.pyx)."""

from __future__ import annotations

import os

import pytest

from metnos.mechanisms.store import event_scan


def test_the_scan_runs_the_compiled_loop_where_it_was_built() -> None:
    if event_scan._compiled_batch is None:
        if os.environ.get("METNOS_REQUIRE_COMPILED_SCAN"):
            pytest.fail("METNOS_REQUIRE_COMPILED_SCAN is set but the scan's compiled loop was not built: reinstall with a C compiler (pip install -e .)")
        pytest.skip("the scan's compiled loop was not built (no C compiler at install)")
    assert event_scan.compiled_loop()
    assert event_scan._batch_loop is event_scan._compiled_events_batch
