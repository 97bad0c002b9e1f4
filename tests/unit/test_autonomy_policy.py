"""The autonomy table (metnos/mechanisms/sandbox/autonomy.py): what each level derives, and what the vaglio decides at each."""

from __future__ import annotations

from pathlib import Path

import pytest

from metnos.mechanisms.executors.manifest import load_manifest
from metnos.mechanisms.sandbox import autonomy
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.runtime.step.vaglio import GuardPolicy, Verdict, vaglio

FILES = SandboxProfile(fs_read=("~/a",), fs_write=("~/notes", "~/a"))


def test_read_only_turns_every_write_grant_into_a_read_grant() -> None:
    derived = autonomy.sandbox_profile("read_only", FILES)
    assert derived.fs_write == () and derived.fs_read == ("~/a", "~/notes")
    assert autonomy.sandbox_profile("supervised", FILES) is FILES
    assert autonomy.sandbox_profile("full", FILES) is FILES


def test_only_read_only_withholds_side_effects() -> None:
    assert not autonomy.offers("read_only", side_effects=True)
    assert autonomy.offers("read_only", side_effects=False)
    assert autonomy.offers("supervised", side_effects=True) and autonomy.offers("full", side_effects=True)


# Every seed executor's manifest, as shipped: the table below is over the real contracts.
SEEDS = Path(__file__).resolve().parents[2] / "executors"
MANIFESTS = {d.name: load_manifest(d / "manifest.toml") for d in sorted(SEEDS.iterdir()) if (d / "manifest.toml").is_file()}
SIDE_EFFECTING = sorted(name for name, m in MANIFESTS.items() if m.contract.side_effects)
POLICY = GuardPolicy.core("/home/u", workspace="/home/u/.local/share/metnos")


def calls_of(name: str) -> list[dict]:
    """The manifest's own example calls; for write_files also an overwrite of a file that exists."""
    calls = [dict(e.args) for e in MANIFESTS[name].examples]
    if name == "write_files":
        calls.append({"files": [{"path": "~/notes/todo.md", "content": "replaced", "mode": "overwrite"}]})
    return calls


def test_the_side_effecting_seeds_are_the_seven_that_cannot_be_repeated_safely() -> None:
    # A new seed with side effects joins the table below by itself; this names the ones it holds today.
    assert SIDE_EFFECTING == ["delete_events", "delete_files", "move_files", "run_commands", "send_messages", "set_events",
                              "write_files"]
    assert all(not MANIFESTS[n].contract.idempotent for n in SIDE_EFFECTING)


@pytest.mark.parametrize("name", SIDE_EFFECTING)
@pytest.mark.parametrize("level", ["read_only", "supervised", "full"])
def test_what_the_vaglio_decides_at_each_level_for_each_side_effecting_seed(level: str, name: str) -> None:
    contract = MANIFESTS[name].contract
    for args in calls_of(name):
        def judged(**kw: object) -> Verdict:
            return vaglio(name, args, intent_text=f"please {name.replace('_', ' ')}", policy=POLICY, autonomy=level,
                          side_effects=contract.side_effects, idempotent=contract.idempotent, **kw)

        asked, answered = judged(), judged(user_approved=True)
        if level == "read_only":
            # Only looking: denied before any question, and an answer cannot change that.
            assert (asked.decision, asked.blocked_by, asked.rules) == ("deny", "autonomy", ("autonomy:read_only",)), args
            assert answered.decision == "deny", args
        else:
            # supervised and full alike: the question is asked, and only the user's answer lets it run.
            assert asked.decision == "ask" and "guard:precautionary_asymmetry" in asked.rules, (level, args)
            assert asked.blocked_by is None and not asked.approved
            assert answered.decision == "allow" and answered.approved, (level, args)
        if level == "full":
            assert asked.reason.endswith("it needs your approval, even at autonomy full")


@pytest.mark.parametrize("level", ["read_only", "supervised", "full"])
def test_what_only_reads_is_never_asked_at_any_level(level: str) -> None:
    for name, manifest in MANIFESTS.items():
        if manifest.contract.side_effects:
            continue
        for example in manifest.examples:
            verdict = vaglio(name, dict(example.args), intent_text="x", policy=POLICY, autonomy=level,
                             side_effects=False, idempotent=manifest.contract.idempotent)
            assert verdict.decision == "allow", (level, name, example.args, verdict)


def test_levels_are_read_from_config_and_a_bad_one_is_named(tmp_path: Path) -> None:
    from metnos.settings.config_file import ConfigError
    from metnos.settings.config_file import load_runtime_config

    config = tmp_path / "config.toml"
    assert load_runtime_config(config).autonomy == "supervised"
    config.write_text('[runtime]\nautonomy = "ReadOnly"\n')
    assert load_runtime_config(config).autonomy == "read_only"
    config.write_text('[runtime]\nautonomy = 3\n')
    with pytest.raises(ConfigError, match=r"\[runtime\] autonomy: 3 is not an autonomy level"):
        load_runtime_config(config)
    with pytest.raises(autonomy.AutonomyError, match="--autonomy: 'yolo' is not an autonomy level"):
        autonomy.parse_level("yolo")
