"""Finding the embedded model for the tests that need it, or saying why not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metnos.mechanisms.llm.embedded import xllamacpp_available
from metnos.mechanisms.llm.model_files import ENV_MODEL_CHOICE, resolve_model
from metnos.settings.workspace import Workspace

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
