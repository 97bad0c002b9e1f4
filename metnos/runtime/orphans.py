"""Closing turns whose writer is gone (SIGKILL, power cut) with ``TurnAbandoned``.

Every boot of the runtime (each command, the daemon at start) looks at the
turns the log still holds open. A turn whose lock (:mod:`metnos.runtime.lease`)
can be taken has no writer left: it is closed as abandoned, with the last
step and the number of events its writer committed. A turn whose lock is held
is being written and is left alone. A log shared by several machines
(PostgreSQL) has turns whose writers live elsewhere: there only the turns with
a lock file in this workspace are judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, PersistenceError

from domain.turn import OPEN, Turn
from metnos.runtime.lease import TurnLease, lock_dir

REASON = "its writer stopped (killed, or the machine went down) before the turn closed"


@dataclass
class OrphanReport:
    closed: list[str] = field(default_factory=list)
    # Turns that could not be closed now (a full disk); the next command tries again.
    problems: list[str] = field(default_factory=list)


def log_is_shared(log: Any) -> bool:
    return type(log.factory).__module__.startswith("eventsourcing.postgres")


def close_orphaned_turns(runtime: Any, turns_state: dict[str, Any]) -> OrphanReport:
    report = OrphanReport()
    workspace = runtime.workspace
    open_turns = {key for key, t in turns_state["turns"].items() if t["status"] == OPEN}
    local = not log_is_shared(runtime.log)
    for turn_id in sorted(open_turns):
        lease = TurnLease.claim(workspace, turn_id, create=local)
        if lease is None:
            continue
        try:
            if _abandon(runtime, turn_id):
                report.closed.append(turn_id)
        except IntegrityError:
            pass  # another process closed it between our read and our write
        except (PersistenceError, OSError) as e:
            report.problems.append(f"turn {turn_id} is still open: {e}")
        finally:
            lease.release()
    _sweep(workspace, open_turns)
    return report


def _abandon(runtime: Any, turn_id: str) -> bool:
    ident = UUID(turn_id)
    events = list(runtime.log.events.get(ident))
    if not events or not isinstance(events[0], Turn.TurnStarted):
        return False
    turn = runtime.log.repository.get(ident)
    if turn.status != OPEN:
        return False
    reached = max((e.step for e in events if isinstance(getattr(e, "step", None), int)), default=0)
    turn.record(Turn.TurnAbandoned, at=runtime.clock(), step=reached, events=len(events), reason=REASON)
    runtime.log.save(turn)
    return True


def _sweep(workspace: Any, open_turns: set[str]) -> None:
    """Lock files left by writers killed after their turn closed, or before its first commit
    (the log never heard of that turn): nothing holds them, nothing needs them."""
    folder = lock_dir(workspace)
    if not folder.is_dir():
        return
    for path in folder.glob("*.lock"):
        turn_id = path.stem
        if turn_id not in open_turns:
            # A live writer holds its lock, so claiming fails and its file stays.
            lease = TurnLease.claim(workspace, turn_id, create=False)
            if lease is not None:
                lease.release()
