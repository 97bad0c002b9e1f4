import json
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from metnos.mechanisms.executors.birth import SpawnResult, spawn_subprocess
from metnos.mechanisms.executors.install import install_executor
from metnos.mechanisms.invocation.birth import make_sandboxed_spawn
from metnos.mechanisms.executors.loader import load_executors
from metnos.mechanisms.executors.schemas import SchemaCheckCache
from metnos.mechanisms.executors.signing import REQUIRED_FILES, write_signature
from metnos.settings.workspace import Workspace
from tests.unit.executor_kit import write_executor


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("METNOS_HOME", str(tmp_path / "home"))
    return Workspace.from_env()


@pytest.fixture
def key():
    return SigningKey.generate()


def _install(ws, key, tmp_path, origin="seed", **kw):
    src = write_executor(tmp_path / "src" / origin / kw.get("name", "get_word") / kw.get("version", "1.0.0"), **kw)
    return install_executor(src, ws.executors_origin_dir(origin), key)


def _load(ws, key, **kw):
    kw.setdefault("birth", False)
    kw.setdefault("reserved_names", ())
    if kw["birth"]:
        kw.setdefault("spawn", make_sandboxed_spawn(ws))  # births run as the runtime runs them
    return load_executors(ws, key.verify_key, **kw)


def _only_quarantine(report):
    assert not report.loaded, report.loaded
    assert len(report.quarantined) == 1, report.quarantined
    return report.quarantined[0]


def test_clean_executor_loads_with_its_digest(ws, key, tmp_path):
    d = _install(ws, key, tmp_path)
    r = _load(ws, key, birth=True)
    assert not r.quarantined and not r.issues
    e = r.get("get_word")
    assert (e.name, e.version, e.origin, e.dir) == ("get_word", "1.0.0", "seed", d)
    assert e.digest.startswith("blake3:") and e.profile.fs_read == ("~/notes",)
    assert e.input_schema["$ref"] == "#/definitions/Input" and "definitions" in e.input_schema


@pytest.mark.parametrize("name", ["manifest.toml", "main.py", "schema.json", "profile.lock"])
def test_a_changed_byte_in_a_signed_file_quarantines_naming_it(ws, key, tmp_path, name):
    d = _install(ws, key, tmp_path)
    data = bytearray((d / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (d / name).write_bytes(bytes(data))
    q = _only_quarantine(_load(ws, key))
    assert (q.file, q.check) == (name, "digest"), q.reason
    assert q.reason.startswith(f"{name}: digest failed")


def test_a_changed_byte_in_the_signature_quarantines(ws, key, tmp_path):
    d = _install(ws, key, tmp_path)
    sig = json.loads((d / "manifest.sig").read_text())
    s = bytearray(bytes.fromhex(sig["signature"]))
    s[0] ^= 0x01
    sig["signature"] = s.hex()
    (d / "manifest.sig").write_text(json.dumps(sig))
    q = _only_quarantine(_load(ws, key))
    assert (q.file, q.check) == ("manifest.sig", "signature")


def test_wrong_key_quarantines(ws, key, tmp_path):
    _install(ws, key, tmp_path)
    q = _only_quarantine(_load(ws, SigningKey.generate()))
    assert (q.file, q.check) == ("manifest.sig", "signature") and "another key" in q.detail


@pytest.mark.parametrize("name", REQUIRED_FILES)
def test_a_missing_file_quarantines_naming_it(ws, key, tmp_path, name):
    d = _install(ws, key, tmp_path)
    (d / name).unlink()
    q = _only_quarantine(_load(ws, key))
    assert (q.file, q.check, q.detail) == (name, "present", "missing")


def test_malformed_toml_signed_anyway_quarantines_with_the_line(ws, key, tmp_path):
    d = _install(ws, key, tmp_path)
    text = (d / "manifest.toml").read_text().replace('summary = "Echo', 'summary = Echo')
    (d / "manifest.toml").write_text(text)
    write_signature(d, key, (d / "profile.lock").read_bytes())
    q = _only_quarantine(_load(ws, key))
    assert (q.file, q.check) == ("manifest.toml", "manifest")
    assert "manifest.toml:6" in q.detail and "malformed TOML" in q.detail


def test_invalid_json_schema_signed_anyway_quarantines(ws, key, tmp_path):
    d = _install(ws, key, tmp_path)
    schema = json.loads((d / "schema.json").read_text())
    schema["definitions"]["Input"]["required"] = "word"  # must be an array
    (d / "schema.json").write_text(json.dumps(schema))
    write_signature(d, key, (d / "profile.lock").read_bytes())
    q = _only_quarantine(_load(ws, key))
    assert (q.file, q.check) == ("schema.json", "schema")
    assert "definitions/Input/required" in q.detail


def test_schema_pointer_that_does_not_resolve_quarantines(ws, key, tmp_path):
    d = _install(ws, key, tmp_path)
    schema = json.loads((d / "schema.json").read_text())
    del schema["definitions"]["Output"]
    (d / "schema.json").write_text(json.dumps(schema))
    write_signature(d, key, (d / "profile.lock").read_bytes())
    q = _only_quarantine(_load(ws, key))
    assert (q.file, q.check) == ("schema.json", "schema") and "Output" in q.detail


def test_stale_profile_lock_quarantines(ws, key, tmp_path):
    d = _install(ws, key, tmp_path)
    old_lock = (d / "profile.lock").read_bytes()
    (d / "manifest.toml").write_text((d / "manifest.toml").read_text().replace('["~/notes"]', '["~"]'))
    write_signature(d, key, old_lock)  # signed, but the lock no longer matches the profile
    q = _only_quarantine(_load(ws, key))
    assert (q.file, q.check) == ("profile.lock", "profile_lock")


def test_folder_identity_must_match_the_manifest(ws, key, tmp_path):
    d = _install(ws, key, tmp_path)
    d.rename(d.with_name("1.0.1"))
    (d.parent / "CURRENT").write_text("1.0.1\n")
    q = _only_quarantine(_load(ws, key))
    assert (q.file, q.check) == ("manifest.toml", "identity") and "1.0.1" in q.detail


def test_synt_cannot_shadow_a_seed(ws, key, tmp_path):
    _install(ws, key, tmp_path)
    _install(ws, key, tmp_path, origin="synt", created_by="synt:run42", version="9.0.0")
    r = _load(ws, key)
    assert [e.origin for e in r.loaded] == ["seed"]
    assert r.get("get_word").origin == "seed"
    (q,) = r.quarantined
    assert (q.origin, q.check) == ("synt", "shadowing") and "seed" in q.detail


def test_reserved_seed_names_hold_even_when_the_seed_is_not_installed(ws, key, tmp_path):
    _install(ws, key, tmp_path, origin="synt", created_by="synt:run1")
    r = _load(ws, key, reserved_names=["get_word"])
    assert not r.loaded and r.quarantined[0].check == "shadowing"
    # Without the reservation the same synt executor is fine, in its own dir.
    r = _load(ws, key)
    assert r.get("get_word").origin == "synt"


def test_origin_must_match_created_by(ws, key, tmp_path):
    _install(ws, key, tmp_path, origin="synt")  # created_by = "seed" in a synt dir
    q = _only_quarantine(_load(ws, key))
    assert q.check == "identity" and "created_by" in q.detail


def test_versions_side_by_side_and_current(ws, key, tmp_path):
    _install(ws, key, tmp_path, version="1.0.0")
    _install(ws, key, tmp_path, version="2.0.0")  # install points CURRENT at the newest install
    name_dir = ws.executors_origin_dir("seed") / "get_word"
    (name_dir / "CURRENT").write_text("1.0.0\n")
    r = _load(ws, key)
    assert sorted(e.version for e in r.loaded) == ["1.0.0", "2.0.0"]
    assert r.get("get_word").version == "1.0.0" and r.get("get_word", "2.0.0").version == "2.0.0"

    (name_dir / "CURRENT").unlink()
    r = _load(ws, key)
    assert r.get("get_word") is None and len(r.loaded) == 2
    assert (r.issues[0].file, r.issues[0].check) == ("CURRENT", "present")

    (name_dir / "CURRENT").write_text("../../../elsewhere\n")
    r = _load(ws, key)
    assert r.get("get_word") is None and "not installed" in r.issues[0].detail


def test_current_naming_a_quarantined_version_gives_no_default(ws, key, tmp_path):
    d = _install(ws, key, tmp_path)
    (d / "main.py").write_text("def run(args, ctx):\n    return {}\n")
    r = _load(ws, key)
    assert r.get("get_word") is None and r.quarantined
    assert r.issues[0].check == "target" and "quarantined" in r.issues[0].detail


def test_failing_birth_quarantines_with_the_test_name(ws, key, tmp_path):
    birth = "def birth_echo(run, tmp):\n    assert run({'word': 'a'})['content'] == 'b', 'echo broke'\n"
    _install(ws, key, tmp_path, birth=birth)
    q = _only_quarantine(_load(ws, key, birth=True))
    assert (q.file, q.check) == ("tests/birth.py", "birth")
    assert "birth_echo" in q.detail and "echo broke" in q.detail and "birth.py:2" in q.detail


def test_crashing_executor_cannot_take_the_loader_down(ws, key, tmp_path):
    main = "import os\ndef run(args, ctx):\n    os._exit(3)\n"
    _install(ws, key, tmp_path, main=main)
    q = _only_quarantine(_load(ws, key, birth=True))
    assert q.check == "birth" and "exit 3" in q.detail


def test_result_breaking_the_output_schema_fails_birth(ws, key, tmp_path):
    main = "def run(args, ctx):\n    return {'ok': 'yes', 'content': args['word']}\n"
    birth = "def birth_echo(run, tmp):\n    assert run({'word': 'ciao'})['content'] == 'ciao'\n"
    _install(ws, key, tmp_path, main=main, birth=birth)
    q = _only_quarantine(_load(ws, key, birth=True))
    assert "output schema" in q.detail and "birth_echo" in q.detail


def test_birth_goes_through_the_spawn_hook(ws, key, tmp_path):
    _install(ws, key, tmp_path)
    seen = []

    def spawn(req):
        seen.append(req)
        return spawn_subprocess(req)

    r = _load(ws, key, birth=True, spawn=spawn, now="2026-05-06T16:45:23+02:00")
    assert r.get("get_word") is not None
    (req,) = seen
    assert req.executor_dir.name == "1.0.0" and req.profile.fs_read == ("~/notes",)
    assert "-I" in req.argv and "-S" in req.argv
    assert json.loads(req.stdin)["ctx"]["now"] == "2026-05-06T16:45:23+02:00"


def test_a_birth_that_fails_once_runs_again_alone_and_only_a_second_failure_quarantines(ws, key, tmp_path):
    _install(ws, key, tmp_path)
    runs = []

    def flaky(req):
        runs.append(req)
        if len(runs) == 1:
            return SpawnResult(-9, b"", b"", timed_out=True)
        return spawn_subprocess(req)

    r = _load(ws, key, birth=True, spawn=flaky)
    assert r.get("get_word") is not None and len(runs) == 2
    ((name, version, first),) = r.birth_retries
    assert (name, version) == ("get_word", "1.0.0") and first.startswith("birth tests did not finish within")

    always = []

    def broken(req):
        always.append(req)
        return SpawnResult(3, b"", b"boom\n")

    q = _only_quarantine(_load(ws, key, birth=True, spawn=broken))
    assert len(always) == 2 and q.check == "birth" and "exit 3" in q.detail


def test_the_schema_check_cache_is_saved_through_a_temporary_file_of_its_own_process(tmp_path: Path) -> None:
    # Two processes booting one workspace at once: the other's temporary file (here a folder in the way, as if it
    # were mid-rename) must not be this one's.
    path = tmp_path / "schema-checks.txt"
    (tmp_path / "schema-checks.tmp").mkdir()
    cache = SchemaCheckCache(path)
    cache.add("blake3:ab|Draft7Validator|jsonschema-4")
    cache.save()
    assert "blake3:ab|Draft7Validator|jsonschema-4" in SchemaCheckCache(path)
