"""Every read model of a workspace, opened by name.

The runtime and a rebuild worker in another process open the same views the
same way: the fold, where its state lives, and where its lines go. A view's
module is imported when the view is opened: a rebuild worker that folds a
few views starts without the others' event classes.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from metnos.settings.workspace import Workspace
from metnos.mechanisms.store.views import ViewStore
from projections.base import MaterialisedView
from projections.daily import DailyLines

VIEW_NAMES = ("catalogue", "audit", "turns", "turn_lines", "mnestome", "schedules", "proposals", "plans")


def open_stores(workspace: Workspace, names: tuple[str, ...] = VIEW_NAMES) -> dict[str, ViewStore]:
    return {name: ViewStore.open(workspace.views_dir, name) for name in names}


def open_views(workspace: Workspace, stores: dict[str, ViewStore]) -> dict[str, Any]:
    """name -> view (a ``MaterialisedView`` or ``DailyLines``) over the given stores."""
    return {name: _open(name, workspace, store) for name, store in stores.items()}


def _open(name: str, workspace: Workspace, store: ViewStore) -> Any:

    if name == "audit":
        return import_module("projections.audit").AuditLines(workspace.audit_dir, store)
    if name == "turn_lines":
        return DailyLines(workspace.data_dir / "turns", store, import_module("projections.turns").TurnLinesFold())
    module, fold = _FOLDS[name]
    return MaterialisedView(getattr(import_module(module), fold)(), store)


_FOLDS = {
    "catalogue": ("projections.catalog", "CatalogueFold"),
    "turns": ("projections.turns", "TurnIndexFold"),
    "schedules": ("projections.schedules", "SchedulesFold"),
    "mnestome": ("projections.mnestome", "MnestomeFold"),
    "proposals": ("projections.proposals", "ProposalsFold"),
    "plans": ("projections.plans", "PlansFold"),
}
