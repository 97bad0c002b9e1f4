"""The weight formula of seeds/004 ch. 6, as properties."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain import mnest_weight as mw

weights = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
days = st.floats(min_value=0.0, max_value=3650.0, allow_nan=False)
lambdas = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
uses = st.integers(min_value=0, max_value=20)


@given(weights, days, lambdas, uses)
def test_reinforced_is_the_formula_and_stays_in_unit_interval(w, dt, lam, n) -> None:
    got = mw.reinforced(w, dt, lam, n)
    assert 0.0 <= got <= 1.0
    assert got == min(1.0, max(0.0, w * math.exp(-lam * dt) + 0.15 * n))


@given(weights, days, days, lambdas)
def test_more_time_never_adds_weight(w, a, b, lam) -> None:
    short, long = sorted((a, b))
    assert mw.decayed(w, long, lam) <= mw.decayed(w, short, lam)


@given(weights, days, lambdas, uses)
def test_more_uses_never_take_weight(w, dt, lam, n) -> None:
    assert mw.reinforced(w, dt, lam, n + 1) >= mw.reinforced(w, dt, lam, n)


@given(weights, days, days, lambdas)
def test_decay_in_two_steps_equals_decay_in_one(w, a, b, lam) -> None:
    assert mw.decayed(mw.decayed(w, a, lam), b, lam) == pytest.approx(mw.decayed(w, a + b, lam), abs=1e-12)


def test_default_half_life_is_about_38_days() -> None:
    half_life = math.log(2) / mw.DEFAULT_LAMBDA
    assert 38 < half_life < 39
    assert mw.decayed(1.0, half_life, mw.DEFAULT_LAMBDA) == pytest.approx(0.5)


def test_one_use_is_fifteen_hundredths_and_seven_saturate() -> None:
    assert mw.reinforced(0.0, 0.0, mw.DEFAULT_LAMBDA, 1) == pytest.approx(0.15)
    assert mw.reinforced(0.0, 0.0, mw.DEFAULT_LAMBDA, 7) == 1.0


def test_time_measured_from_timestamps_never_runs_backwards() -> None:
    t = datetime(2026, 4, 1, tzinfo=timezone.utc)
    assert mw.days_between(t, t + timedelta(hours=36)) == 1.5
    with pytest.raises(mw.TimeRunsBackwards):
        mw.days_between(t, t - timedelta(seconds=1))
    with pytest.raises(mw.TimeRunsBackwards):
        mw.reinforced(0.5, -0.1, mw.DEFAULT_LAMBDA, 1)
    with pytest.raises(ValueError):
        mw.reinforced(0.5, 1.0, mw.DEFAULT_LAMBDA, -1)


def test_lambda_per_tag_takes_the_slowest() -> None:
    assert mw.lambda_for([]) == mw.DEFAULT_LAMBDA
    assert mw.lambda_for(["invoice"], {"photo": 0.05}) == mw.DEFAULT_LAMBDA
    assert mw.lambda_for(["invoice", "photo"], {"photo": 0.05, "invoice": 0.01}) == 0.01
