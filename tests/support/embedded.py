"""Finding the embedded model for the tests that need it, or saying why not."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from metnos.mechanisms.llm.embedded import xllamacpp_available
from metnos.mechanisms.llm.model_files import ENV_MODEL_CHOICE, resolve_model
from metnos.settings.workspace import Workspace
from metnos.adapters.cli import main
from metnos.mechanisms.llm.shared_server import stop_announced
from metnos.services.models import serving
from tests.support.layouts import apply_layout

REQUIRE_ENV = "METNOS_REQUIRE_EMBEDDED"


def embedded_model_or_skip() -> Path:
    """$METNOS_EMBEDDED_MODEL, else the model in the current workspace ($METNOS_MODEL's choice, else the default).

    Skips with the reason when the model or the xllamacpp extra is missing;
    with $METNOS_REQUIRE_EMBEDDED set (the CI step) that is a failure instead,
    so a broken install cannot pass as a run of skipped tests.
    """
    problem = None
    path = Path(os.environ.get("METNOS_EMBEDDED_MODEL")
                or resolve_model(Workspace.from_env().models_dir, os.environ.get(ENV_MODEL_CHOICE)))
    if not xllamacpp_available():
        problem = "the embedded tests need the xllamacpp extra: pip install -e '.[embedded]'"
    elif not path.is_file():
        problem = f"the embedded model is not installed at {path}: run `metnos model install` or set METNOS_EMBEDDED_MODEL"
    if problem is None:
        return path
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set but {problem}")
    pytest.skip(problem)


@contextmanager
def served_home(tmp_path_factory: pytest.TempPathFactory, name: str, claimed: str, what: str,
                files: Callable[[Path], None]) -> Iterator[Path]:
    """A fresh HOME-only workspace (``metnos init``) with the user's ``files`` written first, its model
    served with one thread: the setting of the embedded tests claimed for one model (``claimed``, a
    file name); with another model chosen they skip, saying which claim ``what`` is."""
    model = embedded_model_or_skip()
    if model.name != claimed:
        pytest.skip(f"{what} claimed for {claimed}, not {model.name}: run with {ENV_MODEL_CHOICE} set to it")
    root = tmp_path_factory.mktemp(name)
    with pytest.MonkeyPatch.context() as mp:
        user = apply_layout("xdg", root, mp, os.environ)
        mp.delenv("METNOS_LLM_PROVIDER", raising=False)
        files(user)
        assert main(["init"]) == 0
        ws = Workspace.from_env()
        ws.models_dir.mkdir(parents=True, exist_ok=True)
        resolve_model(ws.models_dir, os.environ.get(ENV_MODEL_CHOICE)).symlink_to(model)
        served = serving(None, port=0, threads=1)
        served.start()
        try:
            yield user
        finally:
            served.stop()
            stop_announced(ws.runtime_dir)
