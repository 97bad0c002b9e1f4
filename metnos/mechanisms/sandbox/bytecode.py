"""Bytecode for the helper modules the host imports inside the sandbox.

The sandbox sees ``landlock.py`` (and ``bridge.py``) as source files bound
into ``/run/metnos``, where no bytecode cache exists and none may be
written, so every invocation compiled them anew: about 2.5 ms for
``landlock.py``, most of what Landlock cost a spawn. The runtime compiles
each one once per process (again when the file changes) into a timestamp
pyc (PEP 552) that bwrap puts where the import system looks for it.

Inside, the import system checks that pyc against the bound source's mtime
and size like any cache, and compiles the source when they differ: a stale
or missing pyc costs time, never correctness. The bytecode is the runtime's
own, made from the very file that is bound; the sandbox may read it as it
may read the source.
"""

from __future__ import annotations

import functools
import importlib.util
import marshal
import os


def inside_pyc(inside_source: str) -> str:
    """Where the sandbox's interpreter (the runtime's own) looks for the cache."""
    return importlib.util.cache_from_source(inside_source)


@functools.lru_cache(maxsize=8)
def _compiled(real: str, inside: str, mtime: int, size: int) -> bytes | None:
    with open(real, "rb") as f:
        st = os.fstat(f.fileno())
        source = f.read()
    if (int(st.st_mtime), st.st_size) != (mtime, size):
        return None  # changed under us: let the sandbox compile it
    # optimize=0: the sandbox's interpreter runs without -O, whatever the runtime's.
    code = compile(source, inside, "exec", dont_inherit=True, optimize=0)
    header = b"".join(x.to_bytes(4, "little") for x in (0, mtime & 0xFFFFFFFF, size & 0xFFFFFFFF))
    return importlib.util.MAGIC_NUMBER + header + marshal.dumps(code)


def pyc_for(real: str, inside: str) -> bytes | None:
    """The pyc of ``real`` as it will be seen at ``inside``; None when it
    cannot be made (the sandbox then compiles the source itself)."""
    try:
        st = os.stat(real)
        return _compiled(real, inside, int(st.st_mtime), st.st_size)
    except (OSError, SyntaxError, ValueError):
        return None
