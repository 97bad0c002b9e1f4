"""Several writers on one log: turns a minute and projection lag, PostgreSQL against LMDB alone.

    python bench/scale_out.py [--seconds 10] [--writers 1 2 4] [--steps 2]

For each number of writers, that many processes each boot a runtime and run
turns back to back for ``--seconds`` (a scripted model and instant executors,
bench/_turns.py: what is measured is the log, not a model). A reader, in a
home of its own, folds the turns view from the same log every 20 ms and notes
when each turn first shows in it; the projection lag is that moment less the
moment its writer committed the turn's opening (the first of its events a view
can show).

- LMDB alone: the writers share one home and its LMDB log (one machine).
- PostgreSQL: each writer has its own home (as on its own machine), all on
  one database; POSTGRES_* name the server, else a throwaway cluster is
  started as the tests do (tests/support/postgres.py).

Printed: a table, and PostgreSQL's turns a minute as a ratio of LMDB's for the
same number of writers. The machine is shared: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.cli_process import Home  # noqa: E402
from tests.support.postgres import postgres_server  # noqa: E402
from tests.support.shared_log import fresh_database  # noqa: E402

HERE = Path(__file__).resolve()
READ_EVERY_S = 0.02


def ready_then_go(out: Path) -> tuple[float, float]:
    """Say this process has booted (``out``.ready); wait for the start and end times every process runs by (``go``)."""
    out.with_suffix(".ready").touch()
    go = out.parent / "go"
    while not go.exists():
        time.sleep(0.01)
    start, until = orjson.loads(go.read_bytes())
    return start, until


def writer(steps: int, out: Path) -> None:
    """Run turns between the times of ``go``; one line a turn: its id and when its opening was committed."""
    from bench._turns import InstantPorts, script, turn_loop
    from metnos.runtime.booted import Runtime
    from metnos.runtime.turn.loop import TurnRequest
    from tests.support import turn_ports

    # The test ports number their ids from 1 in each process; writers of one log need ids of their own.
    turn_ports._ids = itertools.count(uuid4().int >> 2)
    env = dict(os.environ)
    with Runtime.boot(birth=False) as rt, out.open("w") as lines:
        # When each of the turn's writes was committed: the view shows a turn from its first (its opening).
        committed: list[float] = []
        write = rt.log._write

        def noted_write(*args: object, **kwargs: object) -> object:
            try:
                return write(*args, **kwargs)
            finally:
                committed.append(time.time())

        rt.log._write = noted_write
        start, until = ready_then_go(out)
        time.sleep(max(0.0, start - time.time()))
        while time.time() < until:
            committed.clear()
            outcome = turn_loop(rt, InstantPorts(rt, script(steps)), env).run(TurnRequest(text="read my notes and tell me what they say"))
            assert outcome.status == "answered", outcome
            lines.write(orjson.dumps([str(outcome.turn_id), committed[0]]).decode() + "\n")
            lines.flush()


def reader(out: Path) -> None:
    """Fold the turns view every READ_EVERY_S until a while after the writers end; one line a turn: its id and
    when it was first seen."""
    from metnos.runtime.booted import Runtime

    seen: set[str] = set()
    with Runtime.boot(birth=False) as rt, out.open("w") as lines:
        seen.update(rt.turns.catch_up(rt.log)["turns"])
        _, until = ready_then_go(out)
        until += 3
        while time.time() < until:
            turns = rt.turns.catch_up(rt.log)["turns"]
            now = time.time()
            for turn_id in turns.keys() - seen:
                lines.write(orjson.dumps([turn_id, now]).decode() + "\n")
            seen.update(turns)
            lines.flush()
            time.sleep(READ_EVERY_S)


def spawn(role: str, env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HERE), "--role", role, *args], env=env)


def measure(writer_envs: list[dict[str, str]], reader_env: dict[str, str], seconds: float, steps: int, work: Path) -> dict[str, float]:
    outs = [work / f"writer-{n}.jsonl" for n in range(len(writer_envs))]
    seen_file = work / "reader.jsonl"
    procs = [spawn("reader", reader_env, "--out", str(seen_file))]
    procs += [spawn("writer", env, "--steps", str(steps), "--out", str(out)) for env, out in zip(writer_envs, outs, strict=True)]
    # Every process booted, then one start for all.
    while not all(out.with_suffix(".ready").exists() for out in [seen_file, *outs]):
        if any(proc.poll() not in (None, 0) for proc in procs):
            raise SystemExit("a bench process failed while booting")
        time.sleep(0.05)
    start = time.time() + 0.5
    (work / "go").write_bytes(orjson.dumps([start, start + seconds]))
    for proc in procs:
        if proc.wait(timeout=seconds + 300) != 0:
            raise SystemExit(f"a bench process failed (exit {proc.returncode})")
    committed = dict(orjson.loads(line) for out in outs for line in out.read_text().splitlines())
    seen = dict(orjson.loads(line) for line in seen_file.read_text().splitlines())
    if not committed:
        raise SystemExit("the writers ran no turn in the time given; give more --seconds")
    lags = sorted((seen[t] - at) * 1000 for t, at in committed.items() if t in seen)
    if len(lags) < len(committed):
        raise SystemExit(f"the reader never saw {len(committed) - len(lags)} of {len(committed)} turns")
    return {"turns_a_minute": len(committed) * 60 / seconds, "lag_median_ms": statistics.median(lags),
            "lag_p95_ms": lags[min(len(lags) - 1, int(0.95 * len(lags)))]}


def init_home(root: Path, env: dict[str, str]) -> Home:
    home = Home(root)
    home.user.mkdir(parents=True)
    done = home.run("init", **env)
    if done.returncode != 0:
        raise SystemExit(f"metnos init failed: {done.stderr}")
    return home


def copy_home(template: Home, root: Path) -> Home:
    home = Home(root)
    shutil.copytree(template.metnos_home, home.metnos_home, ignore=shutil.ignore_patterns(".runtime"))
    home.user.mkdir(parents=True)
    return home


def lmdb_run(writers: int, template: Home, seconds: float, steps: int, work: Path) -> dict[str, float]:
    """Writers in one home on its LMDB log; the reader in another home, reading that log."""
    shared = copy_home(template, work / "lmdb-home")
    reader_home = copy_home(template, work / "lmdb-reader")
    log_dir = next(p.parent for p in shared.metnos_home.rglob("data.mdb") if p.parent.name == "log")
    reader_env = reader_home.env(LMDB_PATH=str(log_dir))
    return measure([shared.env() for _ in range(writers)], reader_env, seconds, steps, work)


def postgres_run(writers: int, template: Home, database: dict[str, str], seconds: float, steps: int, work: Path) -> dict[str, float]:
    """Each writer, and the reader, in a home of its own, all on one database."""
    homes = [copy_home(template, work / f"pg-home-{n}") for n in range(writers + 1)]
    return measure([h.env(**database) for h in homes[1:]], homes[0].env(**database), seconds, steps, work)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "writer":
        return writer(args.steps, args.out)
    if args.role == "reader":
        return reader(args.out)

    root = Path(tempfile.mkdtemp(prefix="metnos-bench-scale-", dir=os.environ.get("BENCH_DIR")))
    rows = []
    try:
        lmdb_template = init_home(root / "lmdb-template", {})
        with postgres_server() as server:
            if server is None:
                raise SystemExit("no PostgreSQL here: install the Debian package postgresql, or set POSTGRES_*")
            with fresh_database(server) as database:
                pg_template = init_home(root / "pg-template", database)
                for n in args.writers:
                    on_lmdb = lmdb_run(n, lmdb_template, args.seconds, args.steps, Path(tempfile.mkdtemp(dir=root)))
                    on_pg = postgres_run(n, pg_template, database, args.seconds, args.steps, Path(tempfile.mkdtemp(dir=root)))
                    rows.append((n, on_lmdb, on_pg))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"turns of {args.steps} steps, scripted model, {args.seconds:.0f} s a run; lag = a turn's first commit to the reader's view showing it")
    print(f"{'writers':>7}  {'LMDB turns/min':>14}  {'lag p50/p95 ms':>15}  {'PG turns/min':>12}  {'lag p50/p95 ms':>15}  {'PG/LMDB':>7}")
    for n, lm, pg in rows:
        print(f"{n:>7}  {lm['turns_a_minute']:>14.0f}  {lm['lag_median_ms']:>7.0f}/{lm['lag_p95_ms']:<7.0f}  {pg['turns_a_minute']:>12.0f}"
              f"  {pg['lag_median_ms']:>7.0f}/{pg['lag_p95_ms']:<7.0f}  {pg['turns_a_minute'] / lm['turns_a_minute']:>7.2f}")


if __name__ == "__main__":
    main()
