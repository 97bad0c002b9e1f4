import pytest

from metnos.settings import load_turn_settings
from metnos.settings.turn import SettingsError, TurnSettings


def test_defaults_when_env_is_empty():
    s = load_turn_settings({})
    assert (s.pool_size, s.judge_threshold, s.cap_steps, s.cap_same_executor, s.cap_same_vectorial,
            s.scratchpad_threshold_bytes) == (12, 0.30, 30, 10, 2, 4096)


def test_blank_value_means_default():
    assert load_turn_settings({"METNOS_ENGINE_POOL_SIZE": "  "}).pool_size == 12


def test_values_are_read():
    s = load_turn_settings({"METNOS_ENGINE_POOL_SIZE": " 20 ", "METNOS_JUDGE_THRESHOLD": "0.5",
                            "METNOS_CAP_STEPS": "5"})
    assert (s.pool_size, s.judge_threshold, s.cap_steps) == (20, 0.5, 5)


@pytest.mark.parametrize("var,value", [
    ("METNOS_ENGINE_POOL_SIZE", "0"),
    ("METNOS_ENGINE_POOL_SIZE", "twelve"),
    ("METNOS_ENGINE_POOL_SIZE", "12.5"),
    ("METNOS_ENGINE_POOL_SIZE", "100000"),
    ("METNOS_JUDGE_THRESHOLD", "1.5"),
    ("METNOS_JUDGE_THRESHOLD", "-0.1"),
    ("METNOS_JUDGE_THRESHOLD", "nan"),
    ("METNOS_JUDGE_THRESHOLD", "high"),
    ("METNOS_CAP_STEPS", "0"),
    ("METNOS_SCRATCHPAD_THRESHOLD_BYTES", "10"),
])
def test_bad_values_are_errors_naming_the_variable(var, value):
    with pytest.raises(SettingsError) as info:
        load_turn_settings({var: value})
    err = info.value
    assert err.variable == var and err.value == value
    assert var in str(err)
    assert err.to_json()["code"] == "invalid_setting"


def test_direct_construction_is_validated_too():
    with pytest.raises(SettingsError):
        TurnSettings(pool_size=0)
    with pytest.raises(SettingsError):
        TurnSettings(judge_threshold=True)
    assert TurnSettings(judge_threshold=1).to_json()["judge_threshold"] == 1


def test_the_offer_is_the_learned_one_by_default_and_the_others_on_request():
    assert load_turn_settings({}).offer == "learned"
    assert load_turn_settings({"METNOS_ENGINE_OFFER": "shortlist"}).offer == "shortlist"
    assert load_turn_settings({"METNOS_ENGINE_OFFER": "gated"}).offer == "gated"
    assert load_turn_settings({"METNOS_ENGINE_OFFER": "catalogue"}).offer == "catalogue"
    assert load_turn_settings({"METNOS_ENGINE_OFFER": "shaped"}).offer == "shaped"
    assert load_turn_settings({"METNOS_ENGINE_OFFER": "learned"}).offer == "learned"
    with pytest.raises(SettingsError) as e:
        load_turn_settings({"METNOS_ENGINE_OFFER": "everything"})
    assert e.value.variable == "METNOS_ENGINE_OFFER" and "catalogue, gated, learned, shaped, shortlist" in e.value.reason
