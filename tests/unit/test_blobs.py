"""The blob store reports a damaged blob as damaged, whatever the damage."""

from __future__ import annotations

import pytest

from metnos.mechanisms.blobs import BlobError, BlobStore


def test_a_blob_round_trips(tmp_path):
    store = BlobStore(tmp_path)
    digest = store.put(b"the only copy" * 1000)
    assert store.get(digest) == b"the only copy" * 1000


@pytest.mark.parametrize("damage", [
    # A zstd frame whose header declares 2**62 bytes of content: decompress()
    # would try to allocate them and raise MemoryError.
    b"\x28\xb5\x2f\xfd\xe0" + (1 << 62).to_bytes(8, "little") + b"\x01\x00\x00garbage",
    b"\x28\xb5\x2f\xfd" + bytes(range(40)),  # a magic number, then garbage
    b"not zstd at all",
])
def test_a_damaged_blob_is_a_blob_error_never_a_memory_error(tmp_path, damage):
    store = BlobStore(tmp_path)
    digest = store.put(b"the only copy")
    store._path(digest).write_bytes(damage)
    with pytest.raises(BlobError, match="damaged|does not match"):
        store.get(digest)


def test_a_truncated_blob_does_not_match_its_digest(tmp_path):
    store = BlobStore(tmp_path)
    digest = store.put(bytes(range(256)) * 400)
    path = store._path(digest)
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(BlobError):
        store.get(digest)
