"""Taking a path's state down to the bytes and putting it back (metnos/mechanisms/filestate.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metnos.mechanisms.blobs import BlobStore
from metnos.mechanisms.filestate import (
    MISSING,
    Limits,
    NotCapturable,
    first_missing,
    put_back,
    take,
)


def tree(root: Path) -> dict[str, tuple[str, bytes | str | None, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p), 0)
            elif p.is_file():
                out[rel] = ("file", p.read_bytes(), p.stat().st_mode & 0o7777)
            else:
                out[rel] = ("dir", None, p.stat().st_mode & 0o7777)
    return out


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


def test_a_tree_comes_back_byte_for_byte_whatever_happened_to_it(tmp_path: Path, blobs: BlobStore) -> None:
    root = tmp_path / "t"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "f.bin").write_bytes(bytes(range(256)) * 10)
    (root / "a" / "b" / "g.txt").write_text("gee")
    (root / "a" / "b" / "g.txt").chmod(0o600)
    (root / "ro").mkdir()
    (root / "ro" / "kept").write_text("k")
    (root / "ro").chmod(0o555)
    (root / "ln").symlink_to("a/f.bin")
    want = tree(root)
    node = take(root, blobs=blobs, limits=Limits())

    (root / "ro").chmod(0o755)
    (root / "a" / "f.bin").write_text("changed")
    (root / "a" / "new").write_text("added")
    (root / "ln").unlink()
    (root / "ln").mkdir()  # a symlink turned into a folder
    import shutil

    shutil.rmtree(root / "a" / "b")
    (root / "a" / "b").write_text("a file where a folder was")
    put_back(root, node, blobs, staging=tmp_path / "staging")
    assert tree(root) == want
    assert not list(tmp_path.rglob(".metnos-undo-*"))  # the staging folder is gone
    assert take(root) == node  # hashes only, the same description


def test_a_path_that_did_not_exist_goes_with_the_folders_made_for_it(tmp_path: Path, blobs: BlobStore) -> None:
    target = tmp_path / "x" / "y" / "z.txt"
    assert first_missing(target) == tmp_path / "x"
    target.parent.mkdir(parents=True)
    target.write_text("z")
    (tmp_path / "x" / "other").write_text("someone else's")
    put_back(target, dict(MISSING), blobs, staging=tmp_path / "staging", created_from=tmp_path / "x")
    assert not target.exists() and not (tmp_path / "x" / "y").exists()
    assert (tmp_path / "x" / "other").exists()  # not empty: no longer only the turn's


def test_the_caps_refuse_rather_than_keep_a_part(tmp_path: Path, blobs: BlobStore) -> None:
    root = tmp_path / "big"
    root.mkdir()
    for i in range(5):
        (root / f"{i}.txt").write_text("x" * 100)
    with pytest.raises(NotCapturable, match="more than 3 entries"):
        take(root, blobs=blobs, limits=Limits(max_entries=3))
    with pytest.raises(NotCapturable, match="more than 250 bytes"):
        take(root, blobs=blobs, limits=Limits(max_bytes=250))
    assert not (tmp_path / "blobs").exists()  # refused before any byte was stored
    os.mkfifo(root / "pipe")
    with pytest.raises(NotCapturable, match="not a file, folder or symlink"):
        take(root, blobs=blobs, limits=Limits())


def test_a_missing_blob_is_an_error_not_an_empty_file(tmp_path: Path, blobs: BlobStore) -> None:
    from metnos.mechanisms.blobs import BlobError

    f = tmp_path / "f.txt"
    f.write_text("content")
    node = take(f, blobs=blobs)
    f.write_text("other")
    for p in (tmp_path / "blobs").rglob("*"):
        if p.is_file():
            p.unlink()
    with pytest.raises(BlobError):
        put_back(f, node, blobs, staging=tmp_path / "staging")
    assert f.read_text() == "other"


def test_across_file_systems_the_bytes_come_back_by_a_rename_beside_the_target(tmp_path: Path, blobs: BlobStore) -> None:
    """Staging in the workspace, the user's folder on another file system: no rename can cross,
    so the bytes go to one hidden name beside the target and are renamed from there."""
    import subprocess

    from metnos.mechanisms.filestate import leftover_of

    mount = tmp_path / "other-fs"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, check=False).returncode != 0:
        pytest.skip("a tmpfs cannot be mounted here: the cross-file-system put-back needs a second file system")
    try:
        root = mount / "t"
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "f.bin").write_bytes(os.urandom(5000))
        (root / "sub" / "f.bin").chmod(0o640)
        os.utime(root / "sub" / "f.bin", ns=(10**18, 10**18 + 1))
        (root / "ln").symlink_to("sub/f.bin")
        want = tree(root)
        node = take(root, blobs=blobs, limits=Limits())
        staging = tmp_path / "staging"
        staging.mkdir()
        assert os.stat(staging).st_dev != os.stat(mount).st_dev
        (root / "sub" / "f.bin").write_text("changed")
        (root / "ln").unlink()
        # What a kill in the copy window would have left: the next put-back replaces it.
        leftover_of(root / "sub" / "f.bin").write_text("half a copy")
        put_back(root, node, blobs, staging=staging)
        assert tree(root) == want
        assert take(root) == node  # times too
        assert [p.name for p in root.rglob("*metnos-undo*")] == []
        assert list(staging.iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
