"""How long the loader takes to verify 300 signed executors.

Builds 300 distinct executors (copies of the shipped seeds under new names,
each with its own schema bytes), signs them, and times:

  baseline   read every signed file, blake3 each, one Ed25519
             verify each: the irreducible I/O and crypto;
  cold       load_executors without birth tests, empty schema-check cache
             (first boot after install or upgrade);
  warm       the same with the cache the cold run left (every later boot);
  birth      load_executors with birth tests (one child process each), in
             the sandbox (the default spawn) and as plain child processes.

Run: python bench/loader_verify.py [--count 300] [--no-birth]
     python bench/loader_verify.py --count 13   # the shipped seeds, once each
Target: warm (and ideally cold) under 300 ms for 300 executors.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import blake3
from nacl.signing import SigningKey

from executors import SEED_DIR
from metnos.mechanisms.executors.birth import spawn_subprocess
from metnos.mechanisms.executors.install import seed_sources
from metnos.mechanisms.executors.loader import CURRENT, load_executors
from metnos.mechanisms.executors.schemas import SchemaCheckCache
from metnos.mechanisms.executors.signing import LOCK, SIGNATURE, sign_executor, signed_message
from metnos.mechanisms.sandbox.bwrap import require_sandbox
from metnos.settings.workspace import Workspace


def build(ws: Workspace, key: SigningKey, count: int) -> list[Path]:
    seeds = seed_sources(SEED_DIR)
    root = ws.executors_origin_dir("seed")
    dirs = []
    for i in range(count):
        src = seeds[i % len(seeds)]
        name = f"{src.name}_{i}"
        d = root / name / "1.0.0"
        shutil.copytree(src, d, ignore=shutil.ignore_patterns("__pycache__"))
        manifest = (d / "manifest.toml").read_text().replace(f'name = "{src.name}"', f'name = "{name}"', 1)
        (d / "manifest.toml").write_text(manifest)
        schema = json.loads((d / "schema.json").read_text())
        schema["$comment"] = f"bench copy {i}"  # distinct bytes: no accidental cache sharing
        (d / "schema.json").write_text(json.dumps(schema, indent=2))
        sign_executor(d, key)
        (d.parent / CURRENT).write_text("1.0.0\n")
        dirs.append(d)
    return dirs


def baseline(dirs: list[Path], key: SigningKey) -> None:
    vk = key.verify_key
    for d in dirs:
        doc = json.loads((d / SIGNATURE).read_bytes())
        digests = {n: blake3.blake3((d / n).read_bytes()).digest() for n in doc["files"]}
        vk.verify(signed_message(digests, (d / LOCK).read_bytes()), bytes.fromhex(doc["signature"]))


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-birth", action="store_true")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="metnos-bench-") as tmp:
        ws = Workspace.from_env({"METNOS_HOME": tmp})
        key = SigningKey.generate()
        t = time.perf_counter()
        dirs = build(ws, key, opts.count)
        print(f"built and signed {len(dirs)} executors in {(time.perf_counter() - t) * 1000:.0f} ms")

        base = timed(lambda: baseline(dirs, key), opts.repeat)

        def cold():
            r = load_executors(ws, key.verify_key, birth=False, reserved_names=(), schema_cache=SchemaCheckCache())
            assert len(r.loaded) == opts.count and not r.quarantined, r.quarantined[:3]

        cache = SchemaCheckCache(ws.runtime_dir / "bench-schema-checks.txt")

        def warm():
            r = load_executors(ws, key.verify_key, birth=False, reserved_names=(), schema_cache=cache)
            assert len(r.loaded) == opts.count and not r.quarantined

        cold_ms = timed(cold, opts.repeat)
        warm()  # fill the cache
        warm_ms = timed(warm, opts.repeat)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, {opts.count} executors, median of {opts.repeat}")
        print(f"  baseline (read + blake3 + ed25519 verify): {base:8.1f} ms")
        print(f"  loader, no birth, cold schema cache:       {cold_ms:8.1f} ms  ({cold_ms / base:.1f}x baseline)")
        print(f"  loader, no birth, warm schema cache:       {warm_ms:8.1f} ms  ({warm_ms / base:.1f}x baseline)"
              f"  target < 300 ms: {'met' if warm_ms < 300 else 'MISSED'}")
        if not opts.no_birth:
            mode = require_sandbox()
            for label, spawn in ((f"sandboxed ({mode})", None), ("plain child", spawn_subprocess)):
                t = time.perf_counter()
                r = load_executors(ws, key.verify_key, birth=True, reserved_names=(), schema_cache=cache, spawn=spawn)
                birth_ms = (time.perf_counter() - t) * 1000
                assert len(r.loaded) == opts.count, [q.reason for q in r.quarantined[:3]]
                print(f"  loader, birth tests, {label + ':':22}{birth_ms:8.1f} ms  ({birth_ms / base:.1f}x baseline,"
                      f" {birth_ms / opts.count:.1f} ms per executor)")


if __name__ == "__main__":
    main()
