"""Issue 16 item 3: the signature covers the whole version folder, and what
may be signed at all."""

from __future__ import annotations

import json

import pytest
from nacl.signing import SigningKey

from metnos.mechanisms.executors.signing import SigningError, sign_executor, verify_executor
from tests.unit.executor_kit import write_executor


@pytest.fixture
def key() -> SigningKey:
    return SigningKey.generate()


@pytest.fixture
def signed(tmp_path, key):
    d = write_executor(tmp_path / "ex", main="import helper\n\ndef run(args, ctx):\n    return {'ok': True, 'content': helper.VALUE}\n",
                       birth="def birth_echo(run, tmp):\n    assert run({'word': 'x'})['content'] == 'benign'\n")
    (d / "helper.py").write_text("VALUE = 'benign'\n")
    (d / "data").mkdir()
    (d / "data" / "words.txt").write_text("ciao\n")
    sign_executor(d, key)
    return d


def failure(d, key):
    v = verify_executor(d, key.verify_key)
    assert not v.ok
    return v.failure


def test_every_file_is_signed_and_verifies(signed, key):
    doc = json.loads((signed / "manifest.sig").read_text())
    assert doc["format"] == 2
    assert sorted(doc["files"]) == ["data/words.txt", "helper.py", "main.py", "manifest.toml", "schema.json", "tests/birth.py"]
    v = verify_executor(signed, key.verify_key)
    assert v.ok, [str(c) for c in v.checks]
    assert set(v.file_digests) == set(doc["files"])


@pytest.mark.parametrize("path", ["tests/birth.py", "helper.py", "data/words.txt"])
def test_a_changed_file_beyond_the_old_three_fails_naming_it(signed, key, path):
    before = verify_executor(signed, key.verify_key).digest
    (signed / path).write_bytes((signed / path).read_bytes() + b"# edited after signing\n")
    bad = failure(signed, key)
    assert (bad.file, bad.check) == (path, "digest") and "differs from the signed one" in bad.detail
    # Re-signed, the version's digest names the new bytes.
    assert sign_executor(signed, key) != before


@pytest.mark.parametrize("path", ["socket.py", "tests/conftest.py", "data/extra.bin"])
def test_an_unknown_file_fails_naming_it(signed, key, path):
    (signed / path).write_text("import os\n")
    bad = failure(signed, key)
    assert (bad.file, bad.check) == (path, "signed") and "not covered by the signature" in bad.detail


def test_a_missing_signed_file_fails_naming_it(signed, key):
    (signed / "data" / "words.txt").unlink()
    bad = failure(signed, key)
    assert (bad.file, bad.check) == ("data/words.txt", "present")


@pytest.mark.parametrize("planted", ["__pycache__/helper.cpython-311.pyc", "tests/__pycache__/birth.cpython-311.pyc",
                                     "helper.pyc", "data/x.pyo"])
def test_bytecode_is_refused_outright(signed, key, planted):
    (signed / planted).parent.mkdir(parents=True, exist_ok=True)
    (signed / planted).write_bytes(b"\x00" * 16)
    bad = failure(signed, key)
    assert bad.check == "bytecode" and planted.startswith(bad.file)
    with pytest.raises(SigningError, match="bytecode"):
        sign_executor(signed, key)


def test_a_symlink_is_refused(signed, key, tmp_path):
    (tmp_path / "outside.py").write_text("X = 1\n")
    (signed / "linked.py").symlink_to(tmp_path / "outside.py")
    bad = failure(signed, key)
    assert (bad.file, bad.check) == ("linked.py", "plain-file")
    with pytest.raises(SigningError, match="symbolic link"):
        sign_executor(signed, key)


def test_a_signature_of_the_old_format_is_refused_with_how_to_resign(signed, key):
    doc = json.loads((signed / "manifest.sig").read_text())
    old = {"format": 1, "algorithm": "ed25519", "key": doc["key"], "signature": "00" * 64,
           "digests": {n: doc["files"][n] for n in ("manifest.toml", "main.py", "schema.json")},
           "profile_lock": doc["profile_lock"]}
    (signed / "manifest.sig").write_text(json.dumps(old))
    bad = failure(signed, key)
    assert (bad.file, bad.check) == ("manifest.sig", "format")
    assert "format 1" in bad.detail and "metnos init" in bad.detail and "metnos executors sign" in bad.detail


@pytest.mark.parametrize("source, what", [
    ("def run(args, ctx):\n    return eval(args['word'])\n", "eval"),
    ("def run(args, ctx):\n    exec('x = 1')\n    return {}\n", "exec"),
    ("def run(args, ctx):\n    c = compile('1', 'f', 'eval')\n    return {}\n", "compile"),
    ("def run(args, ctx):\n    os = __import__('os')\n    return {}\n", "__import__"),
    ("import importlib\n\ndef run(args, ctx):\n    return {}\n", "importlib"),
    ("from importlib import import_module\n\ndef run(args, ctx):\n    return {}\n", "importlib"),
    ("import importlib.util as u\n\ndef run(args, ctx):\n    return {}\n", "importlib"),
    ("import sys\n\ndef run(args, ctx):\n    return sys.modules['x'].importlib\n", "importlib"),
    ("import builtins\n\ndef run(args, ctx):\n    return builtins.compile\n", "builtins"),
    ("def run(args, ctx):\n    return __builtins__['eval']\n", "__builtins__"),
    ("import os\n\ndef run(args, ctx):\n    return getattr(os, 'exec')\n", "exec"),
])
@pytest.mark.parametrize("where", ["main.py", "helper.py", "tests/birth.py"])
def test_dynamic_code_is_refused_at_signing_with_file_and_line(tmp_path, key, source, what, where):
    d = write_executor(tmp_path / "ex")
    body = "\n\n" + source  # the offence is on line 3 or later
    target = d / where
    target.write_text(body if where != "tests/birth.py" else "def birth_x(run, tmp):\n    pass\n" + body)
    with pytest.raises(SigningError) as exc:
        sign_executor(d, key)
    msg = str(exc.value)
    assert f"{where}:" in msg and what in msg
    line = int(msg.split(f"{where}:", 1)[1].split(":", 1)[0])
    assert line >= 3
    assert not (d / "manifest.sig").exists()


def test_ordinary_code_still_signs(tmp_path, key):
    d = write_executor(tmp_path / "ex", main="import re\n\ndef run(args, ctx):\n    rx = re.compile('a')\n    return {'ok': bool(rx)}\n")
    assert sign_executor(d, key).startswith("blake3:")


@pytest.mark.parametrize("planted", ["socket.py", "json/__init__.py", "os.py"])
def test_a_module_named_like_the_standard_library_is_refused(tmp_path, key, planted):
    d = write_executor(tmp_path / "ex")
    (d / planted).parent.mkdir(parents=True, exist_ok=True)
    (d / planted).write_text("X = 1\n")
    with pytest.raises(SigningError, match="standard library"):
        sign_executor(d, key)


def test_every_seed_signs(tmp_path, key):
    import shutil

    from metnos.mechanisms.executors.install import seed_sources

    seeds = seed_sources()
    assert len(seeds) == 23
    for src in seeds:
        d = tmp_path / src.name
        shutil.copytree(src, d, ignore=shutil.ignore_patterns("__pycache__"))
        sign_executor(d, key)
        assert verify_executor(d, key.verify_key).ok
