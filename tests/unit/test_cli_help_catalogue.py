"""Every help line of the command line is a text of the catalogue, with its Italian: a help line added
to a command without its ``help.*`` entry fails here, naming it (metnos/adapters/cli, ``_translate_help``)."""

from __future__ import annotations

import argparse

from metnos.adapters.cli import build_parser
from metnos.settings import i18n


def help_lines(parser: argparse.ArgumentParser) -> set[str]:
    found = {parser.description} if parser.description else set()
    for action in parser._actions:
        if action.help and action.help != argparse.SUPPRESS:
            found.add(action.help)
        if isinstance(action, argparse._SubParsersAction):
            found |= {choice.help for choice in action._choices_actions if choice.help}
            for sub in action.choices.values():
                found |= help_lines(sub)
    return found


def test_every_help_line_has_its_catalogue_entry_and_its_italian(monkeypatch) -> None:
    monkeypatch.setenv("METNOS_LANGUAGE", "en")
    catalogue = i18n.load()
    english = {text.format(): key for key, text in catalogue.source.items() if key.startswith((i18n.HELP, i18n.ARGPARSE))}
    lines = help_lines(build_parser())
    assert len(lines) > 150
    missing = sorted(line for line in lines if line not in english)
    assert missing == [], f"help lines with no help.* entry in metnos/settings/i18n/en.json: {missing}"
    assert all(catalogue.fresh(english[line], "it") for line in lines)


def test_an_error_raised_in_english_is_said_by_its_template_and_an_unknown_one_as_it_is() -> None:
    assert i18n.said_error("no schedule 'ab12'; see `metnos schedule list`", "it") == "nessuna pianificazione 'ab12'; vedi `metnos schedule list`"
    # A field met twice must be the same text twice: otherwise it is not this template's message.
    assert i18n.said_error("no draft for x in fr; see `metnos i18n review de`", "it") == "no draft for x in fr; see `metnos i18n review de`"
    assert i18n.said_error("something no template makes", "it") == "something no template makes"
    assert i18n.said_error("no schedule 'ab12'; see `metnos schedule list`", "en") == "no schedule 'ab12'; see `metnos schedule list`"
