"""Both loops of the full scan, for the tests that compare what a scan gives with the layered path.

The compiled loop (metnos/mechanisms/store/_scan_loop.pyx) is built at install when a C compiler
is at hand; a machine without one skips its half, unless ``METNOS_REQUIRE_COMPILED_SCAN`` is set
(CI sets it), where a loop that was not built fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from metnos.mechanisms.store import event_scan, record_batches

LOOPS = {"python": event_scan._events_batch, "compiled": event_scan._compiled_events_batch}


def skip_unless_compiled() -> None:
    """Skips a test of the compiled loop where it was not built; fails instead where CI requires it."""
    if event_scan._compiled_batch is None:
        if os.environ.get("METNOS_REQUIRE_COMPILED_SCAN"):
            pytest.fail("METNOS_REQUIRE_COMPILED_SCAN is set but the scan's compiled loop was not built: reinstall with a C compiler (pip install -e .)")
        pytest.skip("the scan's compiled loop was not built (no C compiler at install)")


@pytest.fixture(scope="module", params=sorted(LOOPS), autouse=True)
def each_scan_loop(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test of the module that uses it runs once with each loop (module-scoped: hypothesis's tests take it too)."""
    if request.param == "compiled":
        skip_unless_compiled()
    before = event_scan._batch_loop, record_batches._split
    event_scan._batch_loop = LOOPS[request.param]
    # A batch's records are split by the compiled module too, or by Python where it was not built.
    record_batches._split = record_batches._split if request.param == "compiled" else record_batches._split_in_python
    try:
        yield request.param
    finally:
        event_scan._batch_loop, record_batches._split = before
