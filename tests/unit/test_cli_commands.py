"""The ``metnos`` parser loads only the module of the command it is given (issue: every command paid ~2 s
of imports at start for all of them)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from metnos.adapters.cli import COMMANDS, build_parser, command_modules


def _choices(parser: argparse.ArgumentParser) -> set[str]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def test_every_command_module_registers_the_command_it_is_named_after() -> None:
    assert _choices(build_parser()) == set(COMMANDS)
    for name in COMMANDS:
        assert _choices(build_parser([name])) == {name}


@pytest.mark.parametrize(("argv", "expected"), [
    (["--debug", "turns", "list"], ["turns"]),
    (["--help"], list(COMMANDS)),
    (["no-such-command"], list(COMMANDS)),
    ([], list(COMMANDS)),
])
def test_the_modules_loaded_are_those_the_words_name(argv: list[str], expected: list[str]) -> None:
    assert [m.__name__.rsplit(".", 1)[1] for m in command_modules(argv)] == [f"{n}_cmd" for n in expected]


def test_a_light_command_does_not_import_the_turn_machinery() -> None:
    probe = ("import sys; from metnos.adapters.cli import build_parser; build_parser(['daemon', 'token']); "
             "print('metnos.runtime.turn.loop' in sys.modules, 'metnos.adapters.cli.ask_cmd' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
