"""The ``metnos`` command: one sub-command a module, errors as one line."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import traceback
from collections.abc import Sequence

from eventsourcing.persistence import MapperDeserialisationError, PersistenceError

import metnos
from domain.errors import MetnosError
from metnos.services.interrupts import InterruptGate, Interrupted
from metnos.settings import i18n
from metnos.settings.loader import LEAVES, Flag, Loaded, installed, load, runtime_flags, unknown_variables

# A sub-command's module is named after it: ``metnos ask`` is metnos/adapters/cli/ask_cmd.py.
COMMANDS = ("init", "events", "executors", "sandbox", "model", "ask", "turns", "replay", "rebuild", "undo", "mnestome",
            "plans", "schedule", "daemon", "config", "mcp", "synt", "skills", "calendar", "mail", "log", "i18n",
            "telegram", "pair", "devices", "device", "inbox")


def command_modules(argv: Sequence[str]) -> list:
    """The modules whose sub-commands the parser needs for ``argv``: only the one it names, when it names one
    (each module imports what its command runs on, and a command should not pay for all of them at start);
    every one for ``--help``, no command, or a word that is none (argparse then lists them all)."""
    named = next((a for a in argv if not a.startswith("-")), None)
    wanted = [named] if named in COMMANDS else list(COMMANDS)
    return [__import__(f"metnos.adapters.cli.{name}_cmd", fromlist=["register"]) for name in wanted]


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``metnos`` parser, with the sub-commands ``argv`` needs (all of them when it is None)."""
    # argparse says its own words (usage:, options, its errors) through the translation function it
    # looks up as ``argparse._`` at each call: ours says them in the command's language.
    argparse._ = _said_text  # type: ignore[attr-defined]
    parser = argparse.ArgumentParser(prog="metnos", description="A local-first personal agent runtime on an append-only log.")
    parser.add_argument("--debug", action="store_true", help="on an unexpected error, show its traceback (or set METNOS_DEBUG=1)")
    parser.add_argument("--version", action="version", version=f"metnos {metnos.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in command_modules(() if argv is None else argv):
        module.register(sub)
    _translate_help(parser)
    return parser


def _translate_help(parser: argparse.ArgumentParser) -> None:
    """Every description and help line of ``parser`` and its sub-commands in the command's language (the
    catalogue's ``help.*`` texts, found by their English words; tests/unit/test_cli_help_catalogue.py
    holds every one of them to have its entry)."""
    if _language() == i18n.SOURCE:
        return
    if parser.description:
        parser.description = _said_text(parser.description)
    for action in parser._actions:
        if action.help and action.help != argparse.SUPPRESS:
            action.help = _said_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = _said_text(choice.help) if choice.help else choice.help
            for sub in dict.fromkeys(action.choices.values()):
                _translate_help(sub)


def _language() -> str:
    try:
        return i18n.command_language()
    except Exception:  # noqa: BLE001 - a catalogue that cannot be read: the shipped English is said
        return i18n.SOURCE


def _said_text(text: str) -> str:
    try:
        return i18n.said_text(text)
    except Exception:  # noqa: BLE001 - help and argparse's errors must still be said
        return text


_said_error = i18n.said_error_or_as_raised


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    # SIGINT and SIGTERM become Interrupted; a turn defers them to a safe point.
    args.interrupts = InterruptGate()
    args.settings = None
    try:
        args.settings = preflight(args)
        with installed(args.settings):
            if threading.current_thread() is not threading.main_thread():
                return int(args.run(args) or 0)
            with args.interrupts.installed():
                return int(args.run(args) or 0)
    except Interrupted as e:
        print(f"metnos: {_said('cli.stopped', error=e)}", file=sys.stderr)
        return e.exit_code
    except MetnosError as e:
        # Raised in English (what the log and the tests read); said in the command's language.
        print(f"metnos: {_said_error(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"metnos: {_said('cli.interrupted')}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`metnos events | head`): not an error.
        sys.stderr.close()
        return 0
    except Exception as e:  # noqa: BLE001 - the last line of defence keeps tracebacks from users
        debug = args.settings.settings.process.debug if args.settings is not None else args.debug or _debug_env()
        return unexpected(e, debug=debug)


def preflight(args: argparse.Namespace) -> Loaded:
    """What every command does before it starts: every setting read and checked, once (the
    environment, config.toml, this command's flags: a wrong one fails here, named), and who
    owns the workspace. The command receives them as ``args.settings``."""
    loaded = load(os.environ, command_flags(args))
    for note in unknown_variables(loaded.environment):
        print(f"metnos: {note}", file=sys.stderr)
    loaded.workspace.check_owner()
    if not getattr(args, "reports_the_sandbox", False):
        # As `ask` does: a METNOS_SANDBOX that is neither on nor off is refused, with its fix, by every
        # command but the one that reports on the sandbox (it says the same, and why nothing can run).
        loaded.settings.process.sandbox_off  # noqa: B018 - raises SandboxSettingError
    return loaded


def command_flags(args: argparse.Namespace) -> list[Flag]:
    """The settings this command's options set: each option a setting declares (--model, --http, --debug,
    --mode, --autonomy), and each ``--set KEY=VALUE`` of [runtime]."""
    flags = [Flag(leaf.key, value, f"{leaf.flag} {value}" if value is not True else str(leaf.flag))
             for leaf in LEAVES if leaf.flag and leaf.key not in ("runtime.mode", "runtime.autonomy")
             for value in [getattr(args, leaf.mark("dest"), None)] if value not in (None, False)]
    return flags + runtime_flags(getattr(args, "mode", None), getattr(args, "autonomy", None),
                                 getattr(args, "runtime_set", None) or ())


def unexpected(error: Exception, *, debug: bool) -> int:
    """One line naming the cause; the traceback only when asked for."""
    if isinstance(error, PersistenceError):
        print(f"metnos: {_said_error(str(error))}", file=sys.stderr)
        return 2
    if isinstance(error, MapperDeserialisationError):
        # Bytes of a record that no longer decode: the log was damaged where its pages still read.
        print(f"metnos: {_said('cli.record_undecodable', error=error)}", file=sys.stderr)
        return 2
    if isinstance(error, OSError) and error.filename is not None:
        print(f"metnos: {error.strerror or error}: {error.filename}", file=sys.stderr)
        return 2
    if debug:
        traceback.print_exception(error, file=sys.stderr)
    cause = " ".join(f"{type(error).__name__}: {error}".split())
    print(f"metnos: {_said('cli.unexpected_error', cause=cause[:300])}", file=sys.stderr)
    return 70


def _said(key: str, **values: object) -> str:
    """``key`` in the command's language; in the shipped English when the catalogues in force cannot be read
    (these lines report errors, possibly that one)."""
    try:
        return i18n.said(key, **values)
    except Exception:  # noqa: BLE001 - the error being reported must still be said
        return i18n.load().text(key, **values)


def _debug_env() -> bool:
    # Only when the settings could not be read at all (a bug in reading them): METNOS_DEBUG as written.
    return os.environ.get("METNOS_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


if __name__ == "__main__":
    sys.exit(main())
