"""docs/config.md is what the settings model generates: a setting added, renamed or redescribed without
regenerating it (``python -m metnos.settings.reference > docs/config.md``) fails here."""

from __future__ import annotations

from pathlib import Path

from metnos.settings.declare import leaves
from metnos.settings.model import Settings
from metnos.settings.reference import reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def test_docs_config_md_is_generated_from_the_model() -> None:
    assert DOC.read_text() == reference(), "docs/config.md is stale: run `python -m metnos.settings.reference > docs/config.md`"


def test_every_setting_and_variable_is_on_the_page() -> None:
    page = reference()
    for leaf in leaves(Settings):
        assert f"`{'.'.join(leaf.path[1:])}`" in page, leaf.key
        if leaf.env:
            assert f"`{leaf.env}`" in page, leaf.env
