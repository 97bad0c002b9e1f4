"""`metnos model install --hf REPO FILE`: a GGUF fetched from a Hugging Face-like host, resumable and checked.

Every download goes to a real HTTP server on 127.0.0.1 (tests/support/model_hub.py) serving a small
GGUF written in the test; nothing reaches outside the machine.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from metnos.mechanisms.llm.errors import ModelInstallError
from metnos.mechanisms.llm.hf_download import HFFile, install_from_hf
from metnos.mechanisms.llm.model_files import STAGING_DIRNAME
from tests.support.gguf_files import write_gguf
from tests.support.model_hub import ModelHub, model_hub

REPO = "someone/Tiny-Model-GGUF"
FILE = "tiny-q4_k_m.gguf"
TOKEN = "hf_test_token_not_a_real_one"


@pytest.fixture
def model(tmp_path: Path) -> bytes:
    """A GGUF of some 20 KB: the header and metadata of a model, then bytes standing for its tensors."""
    return write_gguf(tmp_path / "source.gguf", chat_template="{{ messages }}", padding=20_000).read_bytes()


@pytest.fixture
def hub(model: bytes):  # noqa: ANN201
    with model_hub() as served:
        served.add(REPO, FILE, model)
        yield served


def install(models: Path, hub: ModelHub, *, sha256: str | None = None, lines: list[str] | None = None,
            file: str = FILE, **kw) -> Path:  # noqa: ANN003
    return install_from_hf(models, HFFile.checked(REPO, file), endpoint=hub.base, sha256=sha256,
                           progress=(lines if lines is not None else []).append, **kw)


def staged(models: Path) -> list[Path]:
    return sorted((models / STAGING_DIRNAME).glob("*")) if (models / STAGING_DIRNAME).exists() else []


def test_a_full_download_is_installed_and_its_sha256_printed(tmp_path: Path, hub: ModelHub, model: bytes) -> None:
    models = tmp_path / "models"
    lines: list[str] = []
    path = install(models, hub, lines=lines)
    digest = hashlib.sha256(model).hexdigest()
    assert path == models / FILE and path.read_bytes() == model
    assert [s.path for s in hub.seen] == [f"/{REPO}/resolve/main/{FILE}"]
    assert "range" not in hub.seen[0].headers
    assert any(digest in line and f"--sha256 {digest}" in line for line in lines), lines
    assert staged(models) == []  # nothing left in the staging folder


def test_an_interrupted_download_resumes_with_a_range_request(tmp_path: Path, hub: ModelHub, model: bytes) -> None:
    models = tmp_path / "models"
    hub.cut_after, hub.cuts = 5000, 1
    lines: list[str] = []
    path = install(models, hub, sha256=hashlib.sha256(model).hexdigest(), lines=lines)
    assert len(hub.seen) == 2
    first, second = hub.seen
    assert "range" not in first.headers
    assert second.headers["range"] == "bytes=5000-"
    assert second.headers["if-range"].startswith('"')  # the ETag of the first reply: a changed file comes whole
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(model).hexdigest()
    assert any("resuming" in line for line in lines) and "sha256 ok" in lines


def test_a_run_that_stops_leaves_its_bytes_and_the_next_run_continues(tmp_path: Path, hub: ModelHub, model: bytes) -> None:
    models = tmp_path / "models"
    hub.cut_after, hub.cuts = 7000, 1
    with pytest.raises(ModelInstallError, match="run the same command again: it continues from there"):
        install(models, hub, attempts=1)
    assert not (models / FILE).exists()
    [partial] = [p for p in staged(models) if p.name.endswith(".partial")]
    assert partial.stat().st_size == 7000
    install(models, hub, sha256=hashlib.sha256(model).hexdigest())
    assert hub.seen[-1].headers["range"] == "bytes=7000-"
    assert (models / FILE).read_bytes() == model and staged(models) == []


def test_a_server_that_ignores_range_is_fetched_again_from_the_start(tmp_path: Path, hub: ModelHub, model: bytes) -> None:
    models = tmp_path / "models"
    hub.honour_range = False
    hub.cut_after, hub.cuts = 5000, 1
    lines: list[str] = []
    path = install(models, hub, sha256=hashlib.sha256(model).hexdigest(), lines=lines)
    assert hub.seen[1].headers["range"] == "bytes=5000-"  # asked to resume; the server sent it whole
    assert path.read_bytes() == model  # written from the start, not appended to the first 5000 bytes
    assert any("starting over" in line for line in lines)


def test_a_sha256_mismatch_installs_nothing_and_names_both_digests(tmp_path: Path, hub: ModelHub, model: bytes) -> None:
    models = tmp_path / "models"
    wrong = "ab" * 32
    with pytest.raises(ModelInstallError) as caught:
        install(models, hub, sha256=wrong)
    said = str(caught.value)
    found = hashlib.sha256(model).hexdigest()
    assert found in said and wrong in said and "nothing was installed" in said and f"--sha256 {found}" in said
    assert not (models / FILE).exists()
    assert staged(models) == []  # the download was removed


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path, hub: ModelHub) -> None:
    models = tmp_path / "models"
    hub.add(REPO, "fake.gguf", b"<!doctype html><html>not a model</html>" * 100)
    with pytest.raises(ModelInstallError, match="is not a GGUF file .*nothing was installed"):
        install(models, hub, file="fake.gguf")
    assert not (models / "fake.gguf").exists() and staged(models) == []


def test_a_file_that_is_not_gguf_is_refused_at_its_first_bytes_not_resumed(tmp_path: Path, hub: ModelHub) -> None:
    hub.add(REPO, "page.gguf", b"<html>" + b"x" * 20_000)
    hub.cut_after, hub.cuts = 5000, 1
    with pytest.raises(ModelInstallError, match="is not a GGUF file"):
        install(tmp_path / "models", hub, file="page.gguf")
    assert len(hub.seen) == 1  # refused on its first bytes: no request for the rest


def test_staged_bytes_that_are_not_gguf_are_refused_when_resumed(tmp_path: Path, hub: ModelHub, model: bytes) -> None:
    models = tmp_path / "models"
    (models / STAGING_DIRNAME).mkdir(parents=True)
    partial = models / STAGING_DIRNAME / HFFile.checked(REPO, FILE).staged_name()
    partial.write_bytes(b"JUNK" + model[4:100])  # what a damaged earlier run left
    with pytest.raises(ModelInstallError, match="is not a GGUF file"):
        install(models, hub)
    assert hub.seen[-1].headers["range"] == "bytes=100-"
    assert not (models / FILE).exists() and staged(models) == []
    assert install(models, hub).read_bytes() == model  # the next run starts afresh


def test_a_file_named_like_a_metnos_size_must_be_that_model(tmp_path: Path, hub: ModelHub, model: bytes) -> None:
    from metnos.mechanisms.llm.model_files import MODELS

    spec = MODELS["0.5b"]
    hub.add(REPO, spec.filename, model)
    with pytest.raises(ModelInstallError, match=f"expected {spec.sha256}"):
        install(tmp_path / "models", hub, file=spec.filename)  # its digest is pinned without --sha256
    with pytest.raises(ModelInstallError, match="the name of Metnos's 0.5b model, .*--size 0.5b"):
        install(tmp_path / "models", hub, file=spec.filename, sha256=hashlib.sha256(model).hexdigest())
    assert not (tmp_path / "models" / spec.filename).exists()


def test_a_missing_file_names_the_repository_and_the_file(tmp_path: Path, hub: ModelHub) -> None:
    with pytest.raises(ModelInstallError) as caught:
        install(tmp_path / "models", hub, file="absent-q8_0.gguf")
    said = str(caught.value)
    assert "HTTP 404" in said and repr(REPO) in said and "'absent-q8_0.gguf'" in said
    assert f"{hub.base}/{REPO}/tree/main" in said


def test_a_token_goes_to_the_endpoint_only_and_is_never_printed(tmp_path: Path, model: bytes) -> None:
    with model_hub() as cdn, model_hub() as hub:
        cdn.add(REPO, FILE, model)
        hub.token, hub.redirect_to = TOKEN, cdn.base
        with pytest.raises(ModelInstallError, match="needs a Hugging Face access token .*HF_TOKEN"):
            install(tmp_path / "models", hub)
        lines: list[str] = []
        path = install(tmp_path / "models", hub, token=TOKEN, lines=lines)
        assert path.read_bytes() == model
        assert hub.seen[-1].headers["authorization"] == f"Bearer {TOKEN}"
        assert all("authorization" not in s.headers for s in cdn.seen)  # another host: httpx dropped it
        assert not any(TOKEN in line for line in lines)


def test_names_that_are_not_a_repository_or_a_gguf_are_refused_before_any_request() -> None:
    with pytest.raises(ModelInstallError, match="OWNER/NAME"):
        HFFile.checked("no-slash", FILE)
    with pytest.raises(ModelInstallError, match="not the name of a .gguf file"):
        HFFile.checked(REPO, "../../etc/passwd.gguf")
    with pytest.raises(ModelInstallError, match="not the name of a .gguf file"):
        HFFile.checked(REPO, "README.md")
    assert HFFile.checked(REPO, "sub/dir/m.gguf", "v1.0").url("http://h") == f"http://h/{REPO}/resolve/v1.0/sub/dir/m.gguf"


# Through the command line: the endpoint from HF_ENDPOINT, the model listed by `model status`.

@pytest.fixture
def hf_env(metnos_home: Path, hub: ModelHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModelHub:
    monkeypatch.setenv("HF_ENDPOINT", hub.base)
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token-here"))
    for key in ("HF_TOKEN", "OLLAMA_MODELS", "METNOS_MODEL"):
        monkeypatch.delenv(key, raising=False)
    return hub


def test_model_install_hf_from_the_command_line_then_status_lists_it(hf_env: ModelHub, model: bytes, capsys) -> None:
    from metnos.adapters.cli import main

    digest = hashlib.sha256(model).hexdigest()
    capsys.readouterr()
    assert main(["model", "install", "--hf", REPO, FILE, "--sha256", digest.upper()]) == 0
    out = capsys.readouterr().out
    assert "sha256 ok" in out and f"metnos ask --model {FILE}" in out
    assert main(["model", "status"]) == 1  # the default size is not installed; the other model is listed
    assert f"also installed: {FILE}" in capsys.readouterr().out


def test_model_install_hf_with_a_wrong_sha256_fails_in_one_line(hf_env: ModelHub, capsys) -> None:
    from metnos.adapters.cli import main

    capsys.readouterr()
    assert main(["model", "install", "--hf", REPO, FILE, "--sha256", "0" * 64]) == 2
    err = capsys.readouterr().err
    assert "expected " + "0" * 64 in err and "nothing was installed" in err and "Traceback" not in err
    assert main(["model", "install", "--sha256", "0" * 64]) == 2
    assert "--sha256 goes with --hf" in capsys.readouterr().err
