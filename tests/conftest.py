from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.layouts import LAYOUTS, apply_layout
from tests.support.postgres import postgres_server
from tests.support.workspace_template import template


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
    from metnos.mechanisms.llm.shared_server import ENV_IDLE

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
    from metnos.mechanisms.sandbox.bwrap import probe

    status = probe()
    if not status.works:
        raise pytest.UsageError(f"METNOS_REQUIRE_BWRAP is set but bubblewrap cannot run: {status.error}")


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest) -> str:
    """Each layout a user can have (tests/support/layouts.py)."""
    return request.param


@pytest.fixture(scope="session")
def initialised_workspace() -> Callable[[str], Path]:
    """A folder per layout holding what `metnos init` leaves (user home and workspace), made once
    a test process (tests/support/workspace_template.py)."""
    return template


@pytest.fixture
def home(layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         initialised_workspace: Callable[[str], Path]) -> Path:
    """An initialised workspace (seeds signed) in ``layout``, and the user's home, as HOME."""
    user_home = apply_layout(layout, tmp_path, monkeypatch, os.environ)
    if os.environ.get("METNOS_TEST_FRESH_INIT") == "1":
        from metnos.adapters.cli import main

        assert main(["init"]) == 0
    else:
        shutil.copytree(initialised_workspace(layout), tmp_path, symlinks=True, dirs_exist_ok=True)
    return user_home
