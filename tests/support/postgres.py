"""A throwaway PostgreSQL cluster on 127.0.0.1, for the scale-out tests.

If POSTGRES_HOST is already set (CI starts a cluster in .ci/run), that server is
used. Otherwise, where the Debian server package is installed, a cluster is made
in a temporary folder and stopped afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(cmd: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root.
    if os.geteuid() == 0:
        # root's PATH may leave out /usr/sbin, where util-linux puts runuser.
        runuser = shutil.which("runuser") or next((p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.path.exists(p)), None)
        if runuser is None:
            raise RuntimeError("runuser (util-linux) is not installed: it starts the test cluster as the postgres user; "
                               "install util-linux, or set POSTGRES_HOST to a running server")
        return [runuser, "-u", "postgres", "--", *cmd]
    return cmd


def _own_database(env: dict[str, str]) -> dict[str, str]:
    """With tests run side by side (pytest-xdist), each worker gets a database of its own on
    the server it was given, so two workers never share tables."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return env
    import psycopg

    own = f"{env.get('POSTGRES_DBNAME', 'metnos')}_{worker}"
    with psycopg.connect(host=env["POSTGRES_HOST"], port=env.get("POSTGRES_PORT", "5432"), user=env.get("POSTGRES_USER"),
                         password=env.get("POSTGRES_PASSWORD") or None, dbname=env.get("POSTGRES_DBNAME", "metnos"),
                         autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{own}"')
        conn.execute(f'CREATE DATABASE "{own}"')
    return {**env, "POSTGRES_DBNAME": own}


@contextmanager
def postgres_server() -> Iterator[dict[str, str] | None]:
    if os.environ.get("POSTGRES_HOST"):
        yield _own_database({k: v for k, v in os.environ.items() if k.startswith("POSTGRES_")})
        return
    bin_dir = _bin_dir()
    if bin_dir is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="metnos-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run(
        _as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-U", "metnos", "--auth=trust", "-E", "UTF8"]),
        check=True, capture_output=True, env=env,
    )
    subprocess.run(
        _as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-o",
                      f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", "start"]),
        check=True, capture_output=True, env=env,
    )
    try:
        for _ in range(50):
            ready = subprocess.run([str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)], capture_output=True)
            if ready.returncode == 0:
                break
            time.sleep(0.1)
        subprocess.run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "metnos", "metnos"], check=True, capture_output=True)
        yield {
            "POSTGRES_DBNAME": "metnos",
            "POSTGRES_HOST": "127.0.0.1",
            "POSTGRES_PORT": str(port),
            "POSTGRES_USER": "metnos",
            "POSTGRES_PASSWORD": "",
        }
    finally:
        subprocess.run(_as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]), capture_output=True, env=env)
        shutil.rmtree(root, ignore_errors=True)
