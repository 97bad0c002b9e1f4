"""Issue 31 item 1: every setting declared once and read by one loader, in one order
(flag > METNOS_* variable > config.toml > default); a wrong value names itself. Real files on disk."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from metnos.mechanisms.llm.errors import LLMConfigError
from metnos.settings import ConfigError, SettingsError, load
from metnos.settings.config_file import effective
from metnos.settings.declare import PRECEDENCE, leaves
from metnos.settings.loader import Flag, runtime_flags
from metnos.settings.model import Settings

SETTINGS_DIR = Path(__file__).resolve().parents[2] / "metnos" / "settings"


def workspace(tmp_path: Path, toml: str = "", **env: str) -> dict[str, str]:
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(toml)
    return {"METNOS_HOME": str(tmp_path), **env}


def test_the_order_is_stated_once() -> None:
    assert PRECEDENCE == ("flag", "environment", "config.toml", "default")


def test_a_config_key_beats_the_default_and_its_variable_beats_the_key(tmp_path: Path) -> None:
    config = str(tmp_path / "config" / "config.toml")
    loaded = load(workspace(tmp_path))
    assert (loaded.turn.cap_steps, loaded.source("turn.cap_steps")) == (30, "default")
    loaded = load(workspace(tmp_path, "[turn]\ncap_steps = 5\n"))
    assert (loaded.turn.cap_steps, loaded.source("turn.cap_steps")) == (5, config)
    loaded = load(workspace(tmp_path, "[turn]\ncap_steps = 5\n", METNOS_CAP_STEPS="7"))
    assert (loaded.turn.cap_steps, loaded.source("turn.cap_steps")) == (7, "METNOS_CAP_STEPS")
    loaded = load(workspace(tmp_path, "[model]\nidle_s = 30\n", METNOS_MODEL_IDLE_S="0"))
    assert (loaded.settings.model.idle_s, loaded.source("model.idle_s")) == (0, "METNOS_MODEL_IDLE_S")


def test_a_flag_beats_its_variable_and_the_file(tmp_path: Path) -> None:
    env = workspace(tmp_path, '[llm]\nmodel = "1.5b"\n[runtime]\nautonomy = "full"\nintent = "model"\n', METNOS_MODEL="0.5b")
    loaded = load(env)
    assert (loaded.settings.llm.model, loaded.source("llm.model")) == ("0.5b", "METNOS_MODEL")
    loaded = load(env, [Flag("llm.model", "/m/x.gguf", "--model /m/x.gguf"),
                        *runtime_flags(autonomy="read_only", items=["intent=rules", "judge.enabled=true"])])
    assert (loaded.settings.llm.model, loaded.source("llm.model")) == ("/m/x.gguf", "--model /m/x.gguf")
    assert (loaded.settings.runtime.autonomy, loaded.source("runtime.autonomy")) == ("read_only", "--autonomy read_only")
    assert (loaded.settings.runtime.intent, loaded.source("runtime.intent")) == ("rules", "--set intent=rules")
    assert loaded.settings.runtime.judge.enabled and loaded.source("runtime.judge.enabled") == "--set judge.enabled=true"
    # Chosen by the flag, the model wins over a tier's own model_path too.
    assert loaded.llm().tier("fast").config.model_path == "/m/x.gguf"


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("METNOS_CAP_STEPS", "0", "must be an integer in [1, 1000]"),
    ("METNOS_CAP_STEPS", "many", "Input should be a valid integer"),
    ("METNOS_MODEL_IDLE_S", "-5", "greater than or equal to 0"),
    ("METNOS_LLM_PROVIDER", "gemini", "Input should be 'openai', 'anthropic' or 'embedded'"),
    ("METNOS_CASCADE_COSINE", "2", "less than or equal to 1"),
    ("METNOS_BIRTH_REUSE", "perhaps", "valid boolean"),
])
def test_a_bad_variable_names_itself_its_value_and_the_form(tmp_path: Path, variable: str, value: str, expected: str) -> None:
    with pytest.raises(SettingsError) as e:
        load(workspace(tmp_path, **{variable: value}))
    assert str(e.value).startswith(f"{variable}={value!r} is invalid: ") and expected in str(e.value)


@pytest.mark.parametrize(("toml", "error", "said"), [
    ("[daemon]\napproval_timeout_s = -1\n", ConfigError, "[daemon] approval_timeout_s: Input should be greater than 0, not -1"),
    ("[turn]\ncap_steps = 0\n", ConfigError, "[turn] cap_steps: must be an integer in [1, 1000], not 0"),
    ("[runtime.judge]\nthreshold = 3\n", ConfigError, "[runtime] judge.threshold: Input should be less than or equal to 1, not 3"),
    ("[model]\nidle_s = \"soon\"\n", LLMConfigError, "[model] idle_s: Input should be a valid number, unable to parse string as a number, not 'soon'"),
    ("[llm]\noverride_url = \"http://x\"\n", LLMConfigError, "[llm] override_url: unknown key"),
])
def test_a_bad_key_names_the_file_the_key_the_value_and_the_form(tmp_path: Path, toml: str, error: type, said: str) -> None:
    with pytest.raises(error) as e:
        load(workspace(tmp_path, toml))
    assert str(e.value).startswith(f"{tmp_path / 'config' / 'config.toml'}: {said}")


def test_a_bad_flag_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--http nope: the HTTP address must be HOST:PORT"):
        load(workspace(tmp_path), [Flag("daemon.http", "nope", "--http nope")])
    with pytest.raises(ConfigError, match=r"with --set intent=maybe: \[runtime\] intent: Input should be 'rules' or 'model', not 'maybe'"):
        load(workspace(tmp_path), runtime_flags(items=["intent=maybe"]))


def test_secrets_are_shown_by_name_never_by_value(tmp_path: Path) -> None:
    loaded = load(workspace(tmp_path, "[telegram]\ntoken_env = \"MY_BOT\"\n", MY_BOT="123:bot-secret", CIPHER_KEY="cipher-secret",
                            POSTGRES_PASSWORD="pg-secret", PERSISTENCE_MODULE="eventsourcing.postgres"))
    rows = {row["key"]: row for row in effective(loaded)}
    shown = repr(rows)
    for secret in ("bot-secret", "cipher-secret", "pg-secret"):
        assert secret not in shown
    assert rows["log.cipher_key"] == {"key": "log.cipher_key", "value": "(set, hidden)", "from": "CIPHER_KEY", "toml": False}
    assert rows["log.store_variables"]["value"] == ["POSTGRES_PASSWORD"]
    assert rows["telegram.token_env"]["value"] == "MY_BOT"
    # eventsourcing still receives them, by their own names.
    assert loaded.settings.log.as_environment() == {"PERSISTENCE_MODULE": "eventsourcing.postgres", "CIPHER_KEY": "cipher-secret",
                                                   "POSTGRES_PASSWORD": "pg-secret"}


def test_every_setting_is_declared_with_a_description() -> None:
    undocumented = [leaf.key for leaf in leaves(Settings) if not (leaf.info.description or "").strip()]
    assert undocumented == []
    variables = [leaf.env for leaf in leaves(Settings) if leaf.env]
    assert len(variables) == len(set(variables)), "a variable sets two settings"


def test_the_settings_package_imports_nothing_above_it() -> None:
    """The ground floor: metnos.settings imports only itself and domain/ (below it), and only at the
    top of a module."""
    upward, deferred = [], []
    for path in sorted(SETTINGS_DIR.glob("*.py")):
        tree = ast.parse(path.read_text())
        top = set(map(id, tree.body))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                for name in names:
                    if name.split(".")[0] in ("metnos", "projections", "replay") and not (
                            name.startswith("metnos.settings")):
                        upward.append(f"{path.name}: {name}")
                if id(node) not in top:
                    deferred.append(f"{path.name}:{node.lineno}")
    assert upward == [] and deferred == []
