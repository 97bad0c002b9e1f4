import json
import stat

import pytest

from metnos.mechanisms.executors.keys import (
    KeyFileError,
    ensure_keypair,
    generate_keypair,
    load_signing_key,
    load_verify_key,
    private_key_path,
    public_key_path,
)
from metnos.mechanisms.executors.signing import SigningError, sign_executor, verify_executor
from metnos.settings.workspace import Workspace
from tests.unit.executor_kit import write_executor


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("METNOS_HOME", str(tmp_path / "home"))
    return Workspace.from_env()


def test_keypair_modes_and_no_overwrite(ws, capsys):
    key = generate_keypair(ws)
    assert stat.S_IMODE(private_key_path(ws).stat().st_mode) == 0o600
    assert stat.S_IMODE(ws.keys_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(public_key_path(ws).stat().st_mode) == 0o644
    assert load_verify_key(ws) == key.verify_key
    assert bytes(load_signing_key(ws)) == bytes(key)
    with pytest.raises(KeyFileError, match="refusing to overwrite"):
        generate_keypair(ws)
    assert bytes(ensure_keypair(ws)) == bytes(key)
    secret_hex = bytes(key).hex()
    assert secret_hex not in capsys.readouterr().out


def test_private_key_readable_by_others_is_refused(ws):
    key = generate_keypair(ws)
    private_key_path(ws).chmod(0o644)
    with pytest.raises(KeyFileError) as exc:
        load_signing_key(ws)
    assert "0644" in str(exc.value) and bytes(key).hex() not in str(exc.value)


def test_sign_then_verify_lists_every_check(ws, tmp_path):
    key = generate_keypair(ws)
    d = write_executor(tmp_path / "ex")
    digest = sign_executor(d, key)
    v = verify_executor(d, key.verify_key)
    assert v.ok, [str(c) for c in v.checks]
    assert v.digest == digest and digest.startswith("blake3:")
    checks = {(c.file, c.check) for c in v.checks}
    assert {("manifest.sig", "signature"), ("manifest.toml", "digest"), ("main.py", "digest"),
            ("schema.json", "digest"), ("profile.lock", "digest"), ("profile.lock", "profile_lock"),
            ("manifest.toml", "manifest"), ("schema.json", "schema")} <= checks
    sig = json.loads((d / "manifest.sig").read_text())
    assert sig["profile_lock"] == (d / "profile.lock").read_text()
    assert v.manifest.sandbox_profile().lock_digest() == (d / "profile.lock").read_text()
    # Re-signing unchanged bytes names the same executor.
    assert sign_executor(d, key) == digest


def test_wrong_key_fails_signature(ws, tmp_path):
    from nacl.signing import SigningKey

    key = generate_keypair(ws)
    d = write_executor(tmp_path / "ex")
    sign_executor(d, SigningKey.generate())
    v = verify_executor(d, key.verify_key)
    assert not v.ok
    assert (v.failure.file, v.failure.check) == ("manifest.sig", "signature")
    assert "another key" in v.failure.detail


def test_signer_refuses_invalid_folders(ws, tmp_path):
    key = generate_keypair(ws)
    d = write_executor(tmp_path / "bad-schema", schema={"type": "object", "properties": {"x": {"type": 12}}})
    with pytest.raises(SigningError, match="schema.json"):
        sign_executor(d, key)
    d = write_executor(tmp_path / "bad-toml")
    (d / "manifest.toml").write_text("[executor\n")
    with pytest.raises(SigningError, match=r"manifest.toml:1"):
        sign_executor(d, key)
    d = write_executor(tmp_path / "no-birth")
    (d / "tests" / "birth.py").unlink()
    with pytest.raises(SigningError, match="birth.py: missing"):
        sign_executor(d, key)
    assert not (d / "manifest.sig").exists()
