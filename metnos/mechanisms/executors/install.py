"""Installing the shipped seed executors into a workspace, signed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from nacl.signing import SigningKey

from metnos.mechanisms.executors.loader import CURRENT
from metnos.mechanisms.executors.manifest import load_manifest
from metnos.mechanisms.executors.signing import LOCK, SIGNATURE, sign_executor
from metnos.settings.workspace import Workspace
from executors import SEED_DIR

# Build debris and signing outputs are never copied: the instance signs anew.
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", LOCK, SIGNATURE, "*.tmp")


def seed_sources(source: Path | None = None) -> list[Path]:
    if source is None:
        source = SEED_DIR
    return sorted(p for p in source.iterdir() if p.is_dir() and (p / "manifest.toml").is_file())


def install_executor(src: Path, origin_dir: Path, signing_key: SigningKey, *, make_current: bool = True) -> Path:
    """Copy one executor folder to ``origin_dir/<name>/<version>/`` and sign it.

    The copy is signed in a staging dir and swapped in, so a crash leaves
    either the old version or the new one, never a half-signed folder.
    """
    manifest = load_manifest(src / "manifest.toml")
    name_dir = origin_dir / manifest.name
    name_dir.mkdir(parents=True, exist_ok=True)
    final = name_dir / manifest.version
    staging = name_dir / f".{manifest.version}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(src, staging, ignore=_SKIP)
    sign_executor(staging, signing_key)
    if final.exists():
        old = name_dir / f".{manifest.version}.old"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
        os.replace(staging, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, final)
    if make_current:
        tmp = name_dir / f".{CURRENT}.tmp"
        tmp.write_text(manifest.version + "\n")
        os.replace(tmp, name_dir / CURRENT)
    return final


def install_seed_executors(workspace: Workspace, signing_key: SigningKey, source: Path | None = None) -> list[Path]:
    """Install every shipped seed, sign it, point CURRENT at it; return the dirs."""
    origin_dir = workspace.executors_origin_dir("seed")
    return [install_executor(src, origin_dir, signing_key) for src in seed_sources(source)]
