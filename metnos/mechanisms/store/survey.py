"""Every record of an LMDB log read one by one, damaged or not: what `metnos log check` and
`metnos log salvage` stand on.

A normal read stops at the first page LMDB cannot follow (random bytes over a page, a file cut
short) and the whole log is refused. Here a damaged stretch is stepped over: after a failure the
next position is sought again from the top of the tree in a fresh transaction, so every record
LMDB can still reach is read, and every position it cannot is named. The index table (aggregate
and version -> position) says which aggregate and version a lost position held.

The log is never written: it is opened read-only without its lock file. A file cut short is not
opened by LMDB at all (mapping it would end in SIGBUS, and a tree that leads past the cut makes
LMDB abort): its records are read from its pages alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmdb
from eventsourcing.persistence import StoredEvent

from metnos.mechanisms.store.environment import DATA_FILE, required_size
from metnos.mechanisms.store.errors import CorruptRecord, LogDamaged
from metnos.mechanisms.store.pages import leaf_records
from metnos.mechanisms.store.record_batches import RecordCursor, expand, index_positions
from metnos.mechanisms.store.records import _decode_originator_id, decode_event, id_bytes, id_from_bytes

EVENTS_TABLE = "metnos_events"
NOTIFICATIONS_TABLE = EVENTS_TABLE + ".notifications"


@dataclass(frozen=True)
class Damage:
    """A position of the log that cannot be read back, and what the index says it held."""

    position: int
    reason: str
    aggregate: str | None = None
    version: int | None = None
    # A whole copy of the record was found on the file's pages: it is intact after all.
    recovered: bool = False


@dataclass
class Survey:
    """What a read of every record found."""

    path: Path
    intact: dict[int, StoredEvent] = field(default_factory=dict)
    damage: list[Damage] = field(default_factory=list)
    # Damage that is not one record's: a file cut short, an index that cannot be read.
    notes: list[str] = field(default_factory=list)
    index: dict[int, tuple[str, int]] = field(default_factory=dict)
    # Positions the tree could not reach whose records were found whole on the file's pages.
    recovered: set[int] = field(default_factory=set)

    @property
    def damaged(self) -> bool:
        return bool(self.damage or self.notes or self.recovered)

    @property
    def last_position(self) -> int:
        return max([*self.intact, *(d.position for d in self.damage), 0])

    def touched(self) -> dict[str, list[int]]:
        """Aggregate id -> the versions of it that were lost, as far as the index tells."""
        lost: dict[str, list[int]] = {}
        for d in self.damage:
            if d.aggregate is not None and d.version is not None and not d.recovered:
                lost.setdefault(d.aggregate, []).append(d.version)
        return lost

    def kind_of(self, aggregate: str) -> str | None:
        """The aggregate's class (``Turn``) as its intact events' topics name it; None when none is left."""
        for event in self.intact.values():
            if str(event.originator_id) == aggregate:
                return event.topic.rsplit(":", 1)[-1].split(".", 1)[0]
        return None

    def unattributed(self) -> list[Damage]:
        """Lost positions the index cannot name an aggregate for."""
        return [d for d in self.damage if d.aggregate is None and not d.recovered]


def survey(log_dir: Path, decode: Callable[[StoredEvent], Any] | None = None) -> Survey:
    """Read every record of the LMDB log in ``log_dir``; ``decode`` (the application's mapper)
    is tried on each, and a record it cannot decode counts as damaged.

    What the tree cannot reach is then sought on the file's leaf pages (``pages``): a record found
    whole there is intact, though its position is still reported as damage of the tree.
    """
    data_file = log_dir / DATA_FILE
    if not data_file.is_file():
        raise LogDamaged(f"there is no log at {log_dir} (no {DATA_FILE}); name the folder that holds the log's {DATA_FILE}")
    found = Survey(path=log_dir)
    unread: dict[int, str] = {}
    bound = 0
    if _cut_short(data_file, found):
        # Pages past the cut are gone, and LMDB asserts (aborting the process) on a tree that leads
        # to them: the records are read from the pages alone.
        found.notes.append("the records were sought page by page")
    else:
        with _opened(log_dir) as env:
            try:
                index_db = env.open_db(EVENTS_TABLE.encode(), create=False)
                notifications_db = env.open_db(NOTIFICATIONS_TABLE.encode(), create=False)
                with env.begin() as txn:
                    bound = txn.stat(notifications_db)["entries"]
            except lmdb.Error as e:
                found.notes.append(f"the log's table of tables cannot be read ({e}): its records were sought page by page")
                index_db = notifications_db = None
            if index_db is not None:
                found.index = _read_index(env, index_db, found)
            bound = max([bound, *found.index])
            if notifications_db is not None:
                for position, outcome in _read_positions(env, notifications_db, bound):
                    reason = outcome if isinstance(outcome, str) else _undecodable(outcome, decode)
                    if reason is None:
                        found.intact[position] = outcome  # type: ignore[assignment]
                    else:
                        unread[position] = reason
    if found.notes or unread or len(found.intact) < bound:
        _seek_on_pages(data_file, found, decode, unread)
    known = set(found.intact) | set(unread)
    for position in sorted(set(found.index) - known):
        unread[position] = "not in the log (its page cannot be reached)"
    for position in range(1, found.last_position):
        if position not in known and position not in found.index:
            unread[position] = "missing (no record and no index entry)"
    found.damage = [_damage(found, position, reason) for position, reason in sorted(unread.items())]
    # Positions the tree does not hold at all (past a cut, or its pages unreachable) but found whole on the pages.
    found.damage += [_damage(found, p, "not reachable in the log's tree") for p in found.recovered if p not in unread]
    found.damage.sort(key=lambda d: d.position)
    return found


def _seek_on_pages(data_file: Path, found: Survey, decode: Callable[[StoredEvent], Any] | None, unread: dict[int, str]) -> None:
    """Records and index entries the tree could not reach, from the file's leaf pages."""
    for leaf_key, leaf_value in leaf_records(data_file):
        if len(leaf_key) == 8:
            try:
                held = expand(NOTIFICATIONS_TABLE, leaf_key, leaf_value)
            except Exception:  # noqa: BLE001 - not a batch of the log (another table's value, or garbage)
                continue
            for key, value in held:
                position = id_from_bytes(key)
                if position in found.intact or position == 0:
                    continue
                try:
                    event = decode_event(NOTIFICATIONS_TABLE, key, value)
                except Exception:  # noqa: BLE001 - not a record of the log (another table's, or garbage)
                    continue
                if _undecodable(event, decode) is None:
                    found.intact[position] = event
                    found.recovered.add(position)
        else:
            for position, named in _index_entries(leaf_key, leaf_value):
                found.index.setdefault(position, named)


def _damage(found: Survey, position: int, reason: str) -> Damage:
    aggregate, version = found.index.get(position, (None, None))
    return Damage(position=position, reason=reason, aggregate=aggregate, version=version, recovered=position in found.recovered)


def _undecodable(event: StoredEvent, decode: Callable[[StoredEvent], Any] | None) -> str | None:
    if decode is None:
        return None
    try:
        decode(event)
    except Exception as e:  # noqa: BLE001 - any failure to decode is this record's damage, named
        return f"its contents cannot be decoded ({type(e).__name__}: {str(e)[:120]})"
    return None


def _cut_short(data_file: Path, found: Survey) -> bool:
    size = data_file.stat().st_size
    wanted = required_size(data_file)
    if wanted is None:
        msg = f"{data_file} has no valid LMDB header: no record can be found in it. Restore it from a backup"
        raise LogDamaged(msg)
    if size >= wanted:
        return False
    found.notes.append(f"{data_file} was cut short: {size} bytes of the {wanted} its header gives; the records past the cut are lost")
    return True


@contextmanager
def _opened(log_dir: Path) -> Iterator[lmdb.Environment]:
    env = lmdb.open(str(log_dir), readonly=True, lock=False, max_dbs=128, subdir=True)
    try:
        yield env
    finally:
        env.close()


def _read_index(env: lmdb.Environment, db: Any, found: Survey) -> dict[int, tuple[str, int]]:
    """Position -> (aggregate id, version) for every index entry that can be read."""
    index: dict[int, tuple[str, int]] = {}
    try:
        with env.begin(buffers=False) as txn:
            for key, value in txn.cursor(db=db):
                for position, named in _index_entries(key, value):
                    index[position] = named
    except lmdb.Error as e:
        found.notes.append(f"the log's index cannot be read past {len(index)} entries ({e}): "
                           "lost records past there cannot be named by turn")
    return index


def _index_entries(key: bytes, value: bytes) -> list[tuple[int, tuple[str, int]]]:
    """(position, (aggregate id, version)) of each event an index entry stands for; none for what is no entry."""
    if len(value) not in (8, 12) or len(key) < 3 + 8:
        return []
    length = int.from_bytes(key[:2], "big")
    if 2 + length + 8 != len(key):
        return []
    try:
        aggregate = str(_decode_originator_id(key[2 : 2 + length]))
    except (ValueError, UnicodeDecodeError):
        return []
    return [(position, (aggregate, held)) for held, position in index_positions(EVENTS_TABLE, key, value)]


def _read_positions(env: lmdb.Environment, db: Any, bound: int) -> Iterator[tuple[int, StoredEvent | str]]:
    """(position, its event or why it cannot be read) for every position up to where the log ends.

    Reads forward from ``position`` until a record cannot be read; that position is reported and
    the next one sought anew, in a fresh transaction (a failed one cannot be used again).
    """
    position = 1
    while True:
        try:
            with env.begin(buffers=False) as txn, txn.cursor(db=db) as raw:
                cursor = RecordCursor(raw, NOTIFICATIONS_TABLE)
                if not cursor.set_range(id_bytes(position)):
                    return
                for key, value in cursor:
                    here = id_from_bytes(key) if len(key) == 8 else -1
                    if here < position or here > max(bound, position):
                        raise _Garbled(f"a key that is no position ({key[:16].hex()})")
                    try:
                        event = decode_event(NOTIFICATIONS_TABLE, key, value)
                    except Exception as e:  # noqa: BLE001 - a record that cannot be decoded is named, and the read goes on
                        raise _Garbled(str(getattr(e, "reason", e))) from None
                    yield here, event
                    position = here + 1
                return
        except (lmdb.Error, _Garbled, CorruptRecord) as e:
            if position > bound:
                return  # past every position the table's count and the index give: nothing was there
            yield position, f"cannot be read: {e}"
            position += 1


class _Garbled(Exception):
    """A record whose key or header makes no sense: its page holds something else."""
