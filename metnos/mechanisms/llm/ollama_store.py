"""An Ollama model's GGUF file, found in Ollama's store on disk (no Ollama server is asked).

Ollama keeps each pulled model as a manifest and content-addressed blobs under its models
folder (``~/.ollama/models``; ``OLLAMA_MODELS`` moves it)::

    manifests/registry.ollama.ai/library/qwen2.5-coder/1.5b   (JSON: config and layers)
    blobs/sha256-<hex>                                        (one file per layer)

The layer whose ``mediaType`` is ``application/vnd.ollama.image.model`` is the GGUF itself, which
llama.cpp serves as it is. A name is ``NAME[:TAG]`` (tag ``latest`` when none), ``NAMESPACE/NAME``
for a model outside the library, or ``HOST/NAMESPACE/NAME`` for another registry.
"""

from __future__ import annotations

import json
from pathlib import Path

from metnos.mechanisms.llm.errors import ModelInstallError

PREFIX = "ollama:"
DEFAULT_ROOT = "~/.ollama/models"
DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"


def manifest_path(root: Path, name: str) -> Path:
    """Where the manifest of ``name`` (``NAME[:TAG]``, ``NS/NAME[:TAG]``, ``HOST/NS/NAME[:TAG]``) lives."""
    repository, _, tag = name.partition(":")
    parts = [p for p in repository.split("/") if p]
    if not parts or len(parts) > 3 or any(p in (".", "..") for p in parts) or "/" in tag:
        raise ModelInstallError(f"{PREFIX}{name} is not an Ollama model name; write it as ollama:NAME[:TAG], e.g. ollama:qwen2.5-coder:1.5b")
    if len(parts) == 1:
        parts = [DEFAULT_NAMESPACE, *parts]
    if len(parts) == 2:
        parts = [DEFAULT_HOST, *parts]
    return root.joinpath("manifests", *parts, tag or DEFAULT_TAG)


def installed_names(root: Path) -> list[str]:
    """Every model in the store, as ``ollama run`` names it (the library's without host and namespace)."""
    manifests = root / "manifests"
    if not manifests.is_dir():
        return []
    names = []
    for path in sorted(p for p in manifests.glob("*/*/*/*") if p.is_file()):
        host, namespace, model, tag = path.relative_to(manifests).parts
        prefix = "" if host == DEFAULT_HOST and namespace == DEFAULT_NAMESPACE else (
            f"{namespace}/" if host == DEFAULT_HOST else f"{host}/{namespace}/")
        names.append(f"{prefix}{model}:{tag}")
    return names


def resolve_ollama(name: str, root: Path) -> Path:
    """The GGUF blob of Ollama's model ``name`` under the store at ``root``; a name it lacks is an error listing what it has."""
    root = root.expanduser()
    manifest = manifest_path(root, name)
    if not manifest.is_file():
        have = installed_names(root)
        if not (root / "manifests").is_dir():
            where = f"there are no Ollama models at {root} (OLLAMA_MODELS, or [model] ollama_models, names another folder)"
        elif have:
            where = f"Ollama's store at {root} has: {', '.join(PREFIX + n for n in have)}"
        else:
            where = f"Ollama's store at {root} has no model"
        raise ModelInstallError(f"no Ollama model {name!r}: {where}; `ollama pull {name}` fetches it")
    try:
        layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers") or []
        digest = next(str(layer["digest"]) for layer in layers if layer.get("mediaType") == MODEL_MEDIA_TYPE)
    except (OSError, ValueError, AttributeError, KeyError, TypeError, StopIteration):
        raise ModelInstallError(f"the Ollama manifest {manifest} names no model layer ({MODEL_MEDIA_TYPE}); "
                                f"`ollama pull {name}` fetches it again") from None
    algorithm, _, hexdigest = digest.partition(":")
    blob = root / "blobs" / f"{algorithm}-{hexdigest}"
    if not hexdigest or "/" in digest or not blob.is_file():
        raise ModelInstallError(f"Ollama's model {name!r} names the blob {digest}, which is not in {root / 'blobs'}; "
                                f"`ollama pull {name}` fetches it again")
    return blob
