"""Where a listed program lives, and what the kernel must let execute for it to start.

A program is looked up by bare name on the sandbox's own PATH (/usr/bin, /bin), never
elsewhere: a name cannot point into a folder the user or a model can write. Starting it
executes more than its own file: a dynamic ELF names its loader (``PT_INTERP``) and a script
its interpreter (``#!``); both are opened for execution, so Landlock must allow them too.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

SEARCH_PATH = ("/usr/bin", "/bin")
_PT_INTERP = 3
# A loader or an interpreter naming another one is followed this far, no further.
_MAX_HOPS = 4


def find_program(name: str) -> Path | None:
    """The real file ``name`` starts on the sandbox's PATH, or None."""
    if "/" in name or not name:
        return None
    for folder in SEARCH_PATH:
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return Path(os.path.realpath(candidate))
    return None


def _elf_interpreter(head: bytes, path: Path) -> Path | None:
    if head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
    if wide:
        phoff, = struct.unpack_from(order + "Q", head, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", head, 0x36)
    else:
        phoff, = struct.unpack_from(order + "I", head, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", head, 0x2A)
    with open(path, "rb") as f:
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            entry = f.read(phentsize)
            if len(entry) < phentsize:
                return None
            if struct.unpack_from(order + "I", entry, 0)[0] != _PT_INTERP:
                continue
            offset, size = (struct.unpack_from(order + "QQ", entry, 8)[0], struct.unpack_from(order + "Q", entry, 32)[0]) \
                if wide else (struct.unpack_from(order + "I", entry, 4)[0], struct.unpack_from(order + "I", entry, 16)[0])
            f.seek(offset)
            return Path(f.read(size).split(b"\0", 1)[0].decode("utf-8", "replace"))
    return None


def _started_by(path: Path) -> Path | None:
    """The file the kernel executes to start ``path``: its ELF loader or its script interpreter."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return None
    if head.startswith(b"#!"):
        words = head[2:].split(b"\n", 1)[0].split()
        return Path(words[0].decode("utf-8", "replace")) if words else None
    if head.startswith(b"\x7fELF") and len(head) >= 64:
        return _elf_interpreter(head, path)
    return None


def executed_for(path: Path) -> list[Path]:
    """``path`` and every loader or interpreter its start executes, symlinks resolved."""
    out = [Path(os.path.realpath(path))]
    for _ in range(_MAX_HOPS):
        nxt = _started_by(out[-1])
        if nxt is None or not nxt.is_absolute():
            break
        real = Path(os.path.realpath(nxt))
        if real in out:
            break
        out.append(real)
    return out
