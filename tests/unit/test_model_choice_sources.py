"""`--model` beyond a size: a file in the models folder, and an Ollama model found in Ollama's store.

No Ollama server can run here (nor is one needed: Metnos reads Ollama's store on disk, never asks
the server), so Ollama's store is built in tmp_path as Ollama lays it out: manifests under
manifests/registry.ollama.ai/library/NAME/TAG naming their layers, blobs under blobs/sha256-<hex>.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from metnos.mechanisms.llm.errors import ModelInstallError
from metnos.mechanisms.llm.model_files import install_hint, resolve_model
from metnos.mechanisms.llm.ollama_store import MODEL_MEDIA_TYPE, installed_names, resolve_ollama
from tests.support.gguf_files import write_gguf


def pull(root: Path, name: str, tag: str, data: bytes, *, namespace: str = "library",
         host: str = "registry.ollama.ai", with_model_layer: bool = True) -> Path:
    """What `ollama pull NAME:TAG` leaves: the model blob, a template blob, and the manifest naming them."""
    blobs = root / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    layers = []
    for media, body in ((MODEL_MEDIA_TYPE, data), ("application/vnd.ollama.image.template", b"{{ .Prompt }}")):
        if media == MODEL_MEDIA_TYPE and not with_model_layer:
            continue
        digest = hashlib.sha256(body).hexdigest()
        (blobs / f"sha256-{digest}").write_bytes(body)
        layers.append({"mediaType": media, "digest": f"sha256:{digest}", "size": len(body)})
    manifest = root / "manifests" / host / namespace / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "config": {}, "layers": layers}))
    return blobs / f"sha256-{hashlib.sha256(data).hexdigest()}"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "ollama-models"
    pull(root, "qwen2.5-coder", "1.5b", write_gguf(tmp_path / "a.gguf", chat_template="{{ a }}").read_bytes())
    pull(root, "llama3.2", "latest", write_gguf(tmp_path / "b.gguf", chat_template="{{ b }}").read_bytes())
    pull(root, "tiny", "q4", b"GGUF-other", namespace="someone")
    return root


def test_an_ollama_name_resolves_to_its_model_blob(store: Path, tmp_path: Path) -> None:
    blob = resolve_model(tmp_path / "models", "ollama:qwen2.5-coder:1.5b", ollama_models=store)
    assert blob.parent == store / "blobs" and blob.name.startswith("sha256-")
    assert blob.read_bytes() == (tmp_path / "a.gguf").read_bytes()  # the model layer, not the template layer
    assert resolve_ollama("llama3.2", store).read_bytes() == (tmp_path / "b.gguf").read_bytes()  # tag latest
    assert resolve_ollama("someone/tiny:q4", store).read_bytes() == b"GGUF-other"


def test_an_ollama_name_the_store_lacks_lists_what_it_has(store: Path) -> None:
    with pytest.raises(ModelInstallError) as caught:
        resolve_model(Path("/nowhere"), "ollama:qwen2.5-coder:7b", ollama_models=store)
    said = str(caught.value)
    assert "no Ollama model 'qwen2.5-coder:7b'" in said
    assert "ollama:llama3.2:latest, ollama:qwen2.5-coder:1.5b, ollama:someone/tiny:q4" in said
    assert "`ollama pull qwen2.5-coder:7b`" in said
    assert installed_names(store) == ["llama3.2:latest", "qwen2.5-coder:1.5b", "someone/tiny:q4"]


def test_no_ollama_store_at_all_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ModelInstallError, match=r"no Ollama models at .*empty-place .*OLLAMA_MODELS"):
        resolve_ollama("qwen2.5-coder", tmp_path / "empty-place")


def test_a_manifest_without_a_model_layer_or_blob_says_to_pull_again(tmp_path: Path) -> None:
    root = tmp_path / "store"
    pull(root, "broken", "latest", b"x", with_model_layer=False)
    with pytest.raises(ModelInstallError, match=r"names no model layer .*`ollama pull broken` fetches it again"):
        resolve_ollama("broken", root)
    blob = pull(root, "gone", "latest", b"GGUF gone")
    blob.unlink()
    with pytest.raises(ModelInstallError, match=r"names the blob sha256:[0-9a-f]{64}, which is not in"):
        resolve_ollama("gone", root)
    with pytest.raises(ModelInstallError, match="not an Ollama model name"):
        resolve_ollama("../../etc:passwd", root)


def test_ollama_models_in_the_environment_moves_the_store(store: Path, tmp_path: Path) -> None:
    from metnos.mechanisms.llm.router import embedded_model_file
    from metnos.settings.llm_tiers import ResolvedTier, TierConfig
    from metnos.settings.workspace import Workspace, WorkspaceConfig

    workspace = Workspace.from_config(WorkspaceConfig(home=str(tmp_path / "home")))
    tier = ResolvedTier("fast", TierConfig(provider="embedded", model_path="ollama:llama3.2"), "test")
    env = {"METNOS_HOME": str(tmp_path / "home"), "OLLAMA_MODELS": str(store), "HOME": str(tmp_path / "user")}
    assert embedded_model_file(tier, workspace, env).read_bytes() == (tmp_path / "b.gguf").read_bytes()
    with pytest.raises(ModelInstallError, match="no Ollama models at"):
        embedded_model_file(tier, workspace, {**env, "OLLAMA_MODELS": str(tmp_path / "elsewhere")})


def test_a_file_name_is_looked_for_in_the_models_folder_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / "mine.Q4_K_M.gguf").write_bytes(b"GGUF")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here.gguf").write_bytes(b"GGUF")
    assert resolve_model(models, "mine.Q4_K_M.gguf") == models / "mine.Q4_K_M.gguf"
    (tmp_path / "mine.Q4_K_M.gguf").write_bytes(b"GGUF")  # the same name where we stand: the folder's wins
    assert resolve_model(models, "mine.Q4_K_M.gguf") == models / "mine.Q4_K_M.gguf"
    assert resolve_model(models, "here.gguf") == Path("here.gguf")  # not in the folder, but where we stand
    absent = resolve_model(models, "absent.gguf")
    assert absent == models / "absent.gguf"
    hint = install_hint(absent)
    assert f"{models} holds: mine.Q4_K_M.gguf" in hint and "--hf REPO FILE" in hint and "ollama:NAME[:TAG]" in hint
    with pytest.raises(ModelInstallError, match=r"neither a size .*nor an Ollama model \(ollama:NAME\[:TAG\]\)"):
        resolve_model(models, "qwen2.5-coder:1.5b")
