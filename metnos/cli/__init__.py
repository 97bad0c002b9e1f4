"""The ``metnos`` command: one sub-command a module, errors as one line."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence

from metnos.cli import events_cmd, init_cmd
from metnos.errors import MetnosError
from metnos.turn.interrupts import InterruptGate, Interrupted

COMMANDS = [init_cmd, events_cmd]


def _optional_commands() -> list:
    """Sub-commands whose modules land with their own capability."""
    found = []
    for name in ("executors_cmd", "sandbox_cmd", "model_cmd", "ask_cmd", "turns_cmd", "replay_cmd", "rebuild_cmd", "undo_cmd", "mnestome_cmd", "schedule_cmd", "daemon_cmd"):
        try:
            module = __import__(f"metnos.cli.{name}", fromlist=["register"])
        except ModuleNotFoundError as e:
            if e.name != f"metnos.cli.{name}":
                raise
            continue
        found.append(module)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="metnos", description="A local-first personal agent runtime on an append-only log.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS + _optional_commands():
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # SIGINT and SIGTERM become Interrupted; a turn defers them to a safe point.
    args.interrupts = InterruptGate()
    try:
        if threading.current_thread() is not threading.main_thread():
            return int(args.run(args) or 0)
        with args.interrupts.installed():
            return int(args.run(args) or 0)
    except Interrupted as e:
        print(f"metnos: {e}; stopped", file=sys.stderr)
        return e.exit_code
    except MetnosError as e:
        print(f"metnos: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("metnos: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`metnos events | head`): not an error.
        sys.stderr.close()
        return 0
    except Exception as e:  # noqa: BLE001 - the last line of defence keeps tracebacks from users
        from eventsourcing.persistence import PersistenceError

        if isinstance(e, PersistenceError):
            print(f"metnos: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
