import pytest

from executors import SEED_DIR
from metnos.mechanisms.executors.manifest import VERB_CATEGORY, ManifestError, load_manifest, parse_manifest
from tests.unit.executor_kit import MANIFEST


def _m(**kw) -> bytes:
    base = {"name": "get_word", "version": "1.0.0", "created_by": "seed"}
    return MANIFEST.format(**{**base, **kw}).encode()


def test_valid_manifest_and_effective_profile():
    m = parse_manifest(_m())
    assert m.name == "get_word" and m.verb == "get" and m.verb_category == "E"
    assert m.origin == "seed" and m.description["it"].startswith("Restituisce")
    p = m.sandbox_profile()
    assert p.fs_read == ("~/notes",) and p.max_duration_s == 2 and p.network_hosts == ()
    assert p.lock_digest().startswith("blake3:")
    # The lock moves with the capabilities: widening is visible.
    wider = parse_manifest(_m().replace(b'["~/notes"]', b'["~"]'))
    assert wider.sandbox_profile().lock_digest() != p.lock_digest()


def test_malformed_toml_names_file_and_line(tmp_path):
    path = tmp_path / "manifest.toml"
    lines = _m().decode().splitlines()
    lines[3] = 'created_by = "seed'  # unterminated string on line 4
    path.write_text("\n".join(lines))
    with pytest.raises(ManifestError) as exc:
        load_manifest(path)
    assert exc.value.line == 4
    assert f"{path}:4" in str(exc.value) and "malformed TOML" in str(exc.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"version": "1.0"}, "executor.version"),
        ({"name": "fetch_word"}, "executor.name"),
        ({"name": "GetWord"}, "executor.name"),
        ({"created_by": "someone"}, "executor.created_by"),
    ],
)
def test_validation_errors_name_the_field(change, field):
    with pytest.raises(ManifestError) as exc:
        parse_manifest(_m(**change))
    assert exc.value.field == field and field in str(exc.value)


def test_unknown_keys_and_incoherent_contracts_are_refused():
    with pytest.raises(ManifestError, match=r"contract\.surprise"):
        parse_manifest(_m().replace(b"idempotent = true", b"idempotent = true\nsurprise = 1"))
    with pytest.raises(ManifestError, match="side_effects"):
        parse_manifest(_m(name="delete_word"))
    with pytest.raises(ManifestError, match="fs:write"):
        parse_manifest(_m().replace(b'"fs:read" = ["~/notes"]', b'"fs:write" = ["~/notes"]'))
    with pytest.raises(ManifestError, match=r"capabilities\.fs:read"):
        parse_manifest(_m().replace(b'["~/notes"]', b'["notes/../.."]'))
    with pytest.raises(ManifestError, match="timezone"):
        parse_manifest(_m().replace(b"2026-05-01T00:00:00Z", b"2026-05-01T00:00:00"))


def test_shipped_seed_manifests():
    dirs = sorted(p for p in SEED_DIR.iterdir() if (p / "manifest.toml").is_file())
    assert len(dirs) >= 13
    for d in dirs:
        m = load_manifest(d / "manifest.toml")
        assert m.name == d.name and m.verb in VERB_CATEGORY
        assert {"en", "it"} <= set(m.description) and m.examples and m.executor.affinity
        assert m.origin == "seed"


@pytest.mark.parametrize(("tags", "ok"), [
    ('["every day", "echo"]', True), ('["Tell"]', False), ('["two  spaces"]', False), ('[" lead"]', False), ('["trail "]', False),
])
def test_affinity_tags_are_lower_case_words_or_phrases(tags: str, ok: bool):
    source = _m()
    changed = source.replace(b'affinity = ["echo", "word"]', b"affinity = " + tags.encode())
    assert changed != source
    if ok:
        assert parse_manifest(changed).executor.affinity == ("every day", "echo")
    else:
        with pytest.raises(ManifestError) as exc:
            parse_manifest(changed)
        assert exc.value.field == "executor.affinity"
