"""A content-addressed blob store: zstd-compressed, named by blake3.

Large observations and the before-images that undo needs live here instead of
in the log; events carry the digest. Writing is atomic (temporary file, then
rename), and a blob that does not match its name on reading is reported, never
returned.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import blake3
import zstandard

from domain.errors import MetnosError

PREFIX = "blake3:"


class BlobError(MetnosError):
    """A blob is missing or does not match its digest."""


def digest_of(data: bytes) -> str:
    return PREFIX + blake3.blake3(data).hexdigest()


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, digest: str) -> Path:
        if not digest.startswith(PREFIX) or len(digest) != len(PREFIX) + 64:
            msg = f"not a blob digest: {digest!r}"
            raise BlobError(msg)
        hexa = digest[len(PREFIX):]
        return self.root / hexa[:2] / hexa[2:]

    def put(self, data: bytes, *, sync: bool = True) -> str:
        """Store ``data``; with ``sync=False`` the caller flushes many at once before relying on them."""
        digest = digest_of(data)
        path = self._path(digest)
        if path.exists():
            return digest
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        compressed = zstandard.ZstdCompressor(level=3).compress(data)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(compressed)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest

    def get(self, digest: str) -> bytes:
        path = self._path(digest)
        try:
            compressed = path.read_bytes()
        except FileNotFoundError:
            msg = f"blob {digest} is not in the store at {self.root}"
            raise BlobError(msg) from None
        try:
            # Streamed: a damaged header may declare any content size, and
            # decompress() would try to allocate all of it (MemoryError).
            # What a damaged frame does yield is caught by the digest below.
            data = zstandard.ZstdDecompressor().decompressobj().decompress(compressed)
        except zstandard.ZstdError as e:
            msg = f"blob {digest} is damaged: {e}"
            raise BlobError(msg) from None
        if digest_of(data) != digest:
            msg = f"blob {digest} does not match its digest"
            raise BlobError(msg)
        return data

    def __contains__(self, digest: str) -> bool:
        return self._path(digest).exists()
