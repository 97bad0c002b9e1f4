"""zstandard compression for event state, skipped where it would not pay.

Most events are a few hundred bytes, which zstd cannot shrink enough to pay
for itself on every read; only states above a threshold are compressed. A
one-byte marker says which, so both kinds read back.
"""

from __future__ import annotations

import threading

import zstandard
from eventsourcing.persistence import Compressor

_RAW = b"\x00"
RAW_MARK = _RAW[0]
_ZSTD = b"\x01"
THRESHOLD = 512
LEVEL = 3


class ZstdCompressor(Compressor):
    def __init__(self, threshold: int = THRESHOLD, level: int = LEVEL) -> None:
        self.threshold = threshold
        self.level = level
        # zstandard's (de)compressor objects must not be shared by threads.
        self._local = threading.local()

    def _codec(self) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        codec = getattr(self._local, "codec", None)
        if codec is None:
            codec = (zstandard.ZstdCompressor(level=self.level), zstandard.ZstdDecompressor())
            self._local.codec = codec
        return codec

    def compress(self, data: bytes) -> bytes:
        if len(data) < self.threshold:
            return _RAW + data
        return _ZSTD + self._codec()[0].compress(data)

    def decompress(self, data: bytes) -> bytes:
        marker = data[0] if data else -1
        if marker == 0:
            return data[1:]
        if marker == 1:
            return self._codec()[1].decompress(data[1:])
        msg = "state has no known compression marker"
        raise ValueError(msg)
