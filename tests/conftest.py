from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.layouts import LAYOUTS, apply_layout
from tests.support.postgres import postgres_server


@pytest.fixture(scope="session")
def postgres_env() -> Iterator[dict[str, str]]:
    with postgres_server() as env:
        if env is None:
            if os.environ.get("METNOS_REQUIRE_POSTGRES"):
                pytest.fail("METNOS_REQUIRE_POSTGRES is set but no PostgreSQL server could be started")
            pytest.skip("no PostgreSQL server here (install the Debian package postgresql)")
        yield env


@pytest.fixture(scope="session", autouse=True)
def short_model_idle() -> Iterator[None]:
    """A model server a test leaves warm ends itself seconds after its last use, not minutes."""
    from metnos.llm.shared_server import ENV_IDLE

    saved = os.environ.get(ENV_IDLE)
    os.environ.setdefault(ENV_IDLE, "20")
    yield
    if saved is None:
        os.environ.pop(ENV_IDLE, None)


@pytest.fixture
def metnos_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Metnos home for one test: everything under tmp_path."""
    home = tmp_path / "metnos-home"
    monkeypatch.setenv("METNOS_HOME", str(home))
    for key in ("PERSISTENCE_MODULE", "LMDB_PATH", "METNOS_LLM_URL", "METNOS_LLM_MODEL"):
        monkeypatch.delenv(key, raising=False)
    return home


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Where CI requires bubblewrap, a sandbox test may not quietly skip."""
    if not os.environ.get("METNOS_REQUIRE_BWRAP"):
        return
    from metnos.sandbox.bwrap import probe

    status = probe()
    if not status.works:
        raise pytest.UsageError(f"METNOS_REQUIRE_BWRAP is set but bubblewrap cannot run: {status.error}")


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest) -> str:
    """Each layout a user can have (tests/support/layouts.py)."""
    return request.param


@pytest.fixture
def home(layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An initialised workspace (seeds signed) in ``layout``, and the user's home, as HOME."""
    from metnos.cli import main

    user_home = apply_layout(layout, tmp_path, monkeypatch, os.environ)
    assert main(["init"]) == 0
    return user_home
