"""SIGINT and SIGTERM as a command lives them: a turn defers them to a safe point (metnos/runtime/turn/interrupts.py).

Kept apart from metnos.services.turns so that a command's start-up imports only this.
"""

from metnos.runtime.turn.interrupts import InterruptGate, Interrupted

__all__ = ["InterruptGate", "Interrupted"]
