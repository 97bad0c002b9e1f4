"""Every read model of a workspace, opened by name.

The runtime and a rebuild worker in another process open the same views the
same way: the fold, where its state lives, and where its lines go.
"""

from __future__ import annotations

from typing import Any

from metnos.workspace import Workspace
from projections.audit import AuditLines
from projections.base import MaterialisedView
from projections.catalog import CatalogueFold
from projections.daily import DailyLines
from projections.mnestome import MnestomeFold
from projections.schedules import SchedulesFold
from projections.store import ViewStore
from projections.turns import TurnIndexFold, TurnLinesFold

VIEW_NAMES = ("catalogue", "audit", "turns", "turn_lines", "mnestome", "schedules")


def open_stores(workspace: Workspace, names: tuple[str, ...] = VIEW_NAMES) -> dict[str, ViewStore]:
    return {name: ViewStore.open(workspace.views_dir, name) for name in names}


def open_views(workspace: Workspace, stores: dict[str, ViewStore]) -> dict[str, Any]:
    """name -> view (a ``MaterialisedView`` or ``DailyLines``) over the given stores."""
    makers = {
        "catalogue": lambda store: MaterialisedView(CatalogueFold(), store),
        "turns": lambda store: MaterialisedView(TurnIndexFold(), store),
        "schedules": lambda store: MaterialisedView(SchedulesFold(), store),
        "mnestome": lambda store: MaterialisedView(MnestomeFold(), store),
        "audit": lambda store: AuditLines(workspace.audit_dir, store),
        "turn_lines": lambda store: DailyLines(workspace.data_dir / "turns", store, TurnLinesFold()),
    }
    return {name: makers[name](store) for name, store in stores.items()}
