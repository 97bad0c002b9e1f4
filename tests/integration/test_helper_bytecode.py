"""The host's helper modules get their bytecode from the runtime, and only
bytecode that matches the bound source is ever used."""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys

import pytest

from metnos.mechanisms.invocation.runner import invoke
from metnos.mechanisms.sandbox import bwrap
from metnos.mechanisms.sandbox.profile import SandboxProfile
from tests.support.sandbox_env import make_env

pytestmark = [pytest.mark.bwrap, pytest.mark.skipif(not bwrap.probe().works, reason="bubblewrap cannot run here")]

REPORT = """
import sys
def run(args, ctx):
    m = sys.modules.get("landlock")
    return {"loaded": m is not None, "marked": getattr(m, "FROM_THE_RUNTIME_PYC", False)}
"""


def _marked_pyc(real: str, inside: str, *, mtime_shift: int = 0) -> bytes:
    """A pyc of ``real`` with a marker the source does not have, its header
    naming the source's mtime (shifted: a stale cache)."""
    with open(real, "rb") as f:
        source = f.read() + b"\nFROM_THE_RUNTIME_PYC = True\n"
    st = os.stat(real)
    code = compile(source, inside, "exec", dont_inherit=True, optimize=0)
    header = b"".join(x.to_bytes(4, "little") for x in (0, (int(st.st_mtime) + mtime_shift) & 0xFFFFFFFF, st.st_size))
    return importlib.util.MAGIC_NUMBER + header + marshal.dumps(code)


@pytest.mark.parametrize("mtime_shift, used", [(0, True), (-1, False)], ids=["matching", "stale"])
def test_landlock_s_bytecode_is_the_runtime_s_only_while_it_matches_the_source(tmp_path, layout, monkeypatch,
                                                                               mtime_shift, used):
    sx = make_env(tmp_path, layout)
    monkeypatch.setattr(bwrap._bytecode, "pyc_for", lambda real, inside: _marked_pyc(real, inside, mtime_shift=mtime_shift))
    out = invoke(sx.executor("report", REPORT), SandboxProfile(), {}, workspace=sx.workspace, env=sx.env)
    assert out.ok and "landlock" in out.layers, out
    assert out.output == {"loaded": True, "marked": used}


def test_the_runtime_compiles_the_helpers_it_binds(tmp_path, layout):
    sx = make_env(tmp_path, layout)
    plan = bwrap.plan_for(sx.executor("report", REPORT), SandboxProfile(network_hosts=("example.org:443",)),
                          workspace=sx.workspace, env=sx.env)
    assert [inside for _, inside in plan.helpers] == [bwrap.INSIDE_LANDLOCK, bwrap.INSIDE_BRIDGE]
    w = bwrap.wrap_plan(plan, [sys.executable, "-c", "pass"])
    try:
        pycs = [w.argv[i + 2] for i, a in enumerate(w.argv) if a == "--ro-bind-data"]
        assert pycs == [importlib.util.cache_from_source(p) for p in (bwrap.INSIDE_LANDLOCK, bwrap.INSIDE_BRIDGE)]
    finally:
        w.close()
