"""The autonomy table (metnos/sandbox/autonomy.py): what each level derives."""

from __future__ import annotations

from pathlib import Path

import pytest

from metnos.sandbox import autonomy
from metnos.sandbox.profile import SandboxProfile

FILES = SandboxProfile(fs_read=("~/a",), fs_write=("~/notes", "~/a"))
MESSAGES = SandboxProfile(fs_write=("$WORKSPACE/outbox",), network_hosts=("api.telegram.org",))


def test_read_only_turns_every_write_grant_into_a_read_grant() -> None:
    derived = autonomy.sandbox_profile("read_only", FILES)
    assert derived.fs_write == () and derived.fs_read == ("~/a", "~/notes")
    assert autonomy.sandbox_profile("supervised", FILES) is FILES
    assert autonomy.sandbox_profile("full", FILES) is FILES


def test_only_read_only_withholds_side_effects() -> None:
    assert not autonomy.offers("read_only", side_effects=True)
    assert autonomy.offers("read_only", side_effects=False)
    assert autonomy.offers("supervised", side_effects=True) and autonomy.offers("full", side_effects=True)


def test_full_waives_only_what_undo_reverses() -> None:
    assert autonomy.waives_approval("full", FILES, side_effects=True)
    assert not autonomy.waives_approval("full", MESSAGES, side_effects=True)  # a message stays sent
    assert not autonomy.waives_approval("full", FILES.model_copy(update={"env": ("TOKEN",)}), side_effects=True)
    assert not autonomy.waives_approval("full", None, side_effects=True)  # a builtin always asks
    assert not autonomy.waives_approval("supervised", FILES, side_effects=True)


def test_levels_are_read_from_config_and_a_bad_one_is_named(tmp_path: Path) -> None:
    from metnos.config import ConfigError
    from metnos.turn.runtime_config import load_runtime_config

    config = tmp_path / "config.toml"
    assert load_runtime_config(config).autonomy == "supervised"
    config.write_text('[runtime]\nautonomy = "ReadOnly"\n')
    assert load_runtime_config(config).autonomy == "read_only"
    config.write_text('[runtime]\nautonomy = 3\n')
    with pytest.raises(ConfigError, match=r"\[runtime\] autonomy: 3 is not an autonomy level"):
        load_runtime_config(config)
    with pytest.raises(autonomy.AutonomyError, match="--autonomy: 'yolo' is not an autonomy level"):
        autonomy.parse_level("yolo")
