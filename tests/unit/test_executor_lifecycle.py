from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from domain.base import ClockNotInjected
from domain.executor import Executor, LifecycleError, executor_id

T = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)


def at(n: int) -> datetime:
    return T + timedelta(seconds=n)


def active(name: str = "read_files") -> Executor:
    e = Executor.register(name=name, origin="seed", at=at(0))
    e.register_version(version="1.0.0", digest="blake3:aa", summary="Read files", at=at(1))
    e.record_signature(version="1.0.0", digest="blake3:aa", key_id="k1", at=at(2))
    e.verify(version="1.0.0", digest="blake3:aa", checks=["signature"], at=at(3))
    e.activate(version="1.0.0", at=at(4))
    e.promote(version="1.0.0", by="loader", at=at(5))
    return e


def test_ids_come_from_origin_and_name_not_chance() -> None:
    assert active().id == executor_id("seed", "read_files")
    assert executor_id("seed", "read_files") != executor_id("synt", "read_files")


def test_the_happy_path_ends_active_and_current() -> None:
    e = active()
    assert e.state_of("1.0.0") == "active"
    assert e.current == "1.0.0"
    assert [type(ev).__name__ for ev in e.collect_events()] == [
        "ExecutorRegistered", "VersionRegistered", "ExecutorSigned", "ExecutorVerified", "ExecutorActivated", "VersionPromoted",
    ]


def test_a_quarantined_version_cannot_be_activated_or_promoted_until_rehabilitated() -> None:
    e = active()
    e.quarantine(version="1.0.0", check="signature", file="manifest.sig", reason="bad signature", at=at(6))
    with pytest.raises(LifecycleError):
        e.activate(version="1.0.0", at=at(7))
    with pytest.raises(LifecycleError):
        e.verify(version="1.0.0", digest="blake3:aa", checks=[], at=at(7))
    e.rehabilitate(version="1.0.0", digest="blake3:bb", by="user", at=at(8))
    assert e.state_of("1.0.0") == "active"
    assert e.versions["1.0.0"]["digest"] == "blake3:bb"


def test_versions_live_side_by_side_and_promotion_needs_an_active_one() -> None:
    e = active()
    e.register_version(version="2.0.0", digest="blake3:cc", summary="Read files v2", at=at(6))
    with pytest.raises(LifecycleError):
        e.promote(version="2.0.0", by="user", at=at(7))
    e.record_signature(version="2.0.0", digest="blake3:cc", key_id="k1", at=at(8))
    e.verify(version="2.0.0", digest="blake3:cc", checks=[], at=at(9))
    e.activate(version="2.0.0", at=at(10))
    e.promote(version="2.0.0", by="user", at=at(11))
    assert e.current == "2.0.0"
    assert e.state_of("1.0.0") == "active"


def test_archive_below_threshold_and_fuse() -> None:
    e = active()
    e.mark_below_threshold(version="1.0.0", uses=0, window_days=30, at=at(6))
    e.activate(version="1.0.0", at=at(7))
    e.fuse(version="1.0.0", into="read_texts", at=at(8))
    e.archive(version="1.0.0", reason="fused", by="ager", at=at(9))
    assert e.state_of("1.0.0") == "archived"
    with pytest.raises(LifecycleError):
        e.quarantine(version="1.0.0", check="x", reason="y", at=at(10))


def test_the_domain_refuses_to_read_the_clock() -> None:
    e = active()
    with pytest.raises(ClockNotInjected):
        e.trigger_event(Executor.ExecutorActivated, version="1.0.0")
