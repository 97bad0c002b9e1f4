"""The runtime at boot: workspace, log, keys, verified executors, read models.

Booting loads and checks every executor (signature, digests, profile lock,
schemas, birth tests), records in the log what changed in their lifecycle,
plants the seed mnests if the mnestome has never had any
(:mod:`metnos.runtime.mnestome.bootstrap`), and brings the catalogue and the audit
lines up to date. Everything else (``metnos executors run``, the turn loop)
works on a booted runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.executor import ACTIVE, BELOW_THRESHOLD
from metnos.runtime.birth_reuse import BirthConditions, BirthLedger, reuse_allowed
from metnos.mechanisms.clock import new_id, system_clock
from domain.errors import MetnosError
from metnos.mechanisms.eventlog import EventLog
from metnos.mechanisms.executors.keys import KeyFileError, key_fingerprint, load_verify_key
from metnos.mechanisms.executors.loader import LoadedExecutor, LoadReport, load_executors
from metnos.mechanisms.invocation.service import Call, Invoker
from metnos.runtime.lifecycle import record_boot
from metnos.runtime.mnestome.bootstrap import plant_seed_mnests
from metnos.runtime.skills.vault import MAIL, account_secrets, skill_credentials
from metnos.runtime.orphans import OrphanReport, close_orphaned_turns
from metnos.settings.calendar import SECRETS_ENV as DAV_SECRETS, VAULT_DRAWER as DAV_DRAWER, secret_names as dav_secret_names
from metnos.settings.loader import env_section, for_workspace
from metnos.settings.mail import SECRETS_ENV as MAIL_SECRETS
from metnos.settings.model import Settings
from metnos.settings.workspace import Workspace
from projections.views import open_stores, open_views
from metnos.runtime.lifecycle import Lifecycle
from metnos.mechanisms.invocation import birth as sandboxed_birth


class NotInitialised(MetnosError):
    """There is no workspace yet."""


class Runtime:
    def __init__(
        self,
        workspace: Workspace,
        log: EventLog,
        report: LoadReport,
        verify_key: Any,
        *,
        clock: Callable[[], datetime] = system_clock,
        ids: Callable[[], UUID] = new_id,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.workspace = workspace
        self.log = log
        self.report = report
        self.verify_key = verify_key
        self.key_id = key_fingerprint(verify_key)
        self.clock = clock
        self.ids = ids
        self.config = config
        # How many seed mnests this boot planted: non-zero only at the mnestome's first boot.
        self.seed_mnests_planted = 0
        # Turns this boot closed as abandoned, and those it could not close now.
        self.orphans = OrphanReport()
        self._stores = open_stores(workspace)
        self._views = open_views(workspace, self._stores)
        self.catalogue = self._views["catalogue"]
        self.turns = self._views["turns"]
        self.schedules = self._views["schedules"]
        self.mnestome = self._views["mnestome"]
        self.proposals = self._views["proposals"]
        self.audit = self._views["audit"]
        self.turn_lines = self._views["turn_lines"]
        self.plans = self._views["plans"]
        # Around a turn's executor call: the services' outbox port (metnos/services/outgoing.py) queues the
        # messages a send_messages step sends; None: the call runs alone.
        self.outgoing: Callable[..., Any] | None = None
        self.invoker = Invoker(
            workspace=workspace, report=report, verify_key=verify_key, clock=clock, new_id=ids,
            is_blocked=self._blocked_reason, config=config, credentials=skill_credentials(workspace),
            seed_secrets=account_secrets(workspace, lambda: seed_accounts(for_workspace(workspace).settings)),
        )

    @classmethod
    def boot(
        cls,
        workspace: Workspace | None = None,
        *,
        birth: bool = True,
        reuse_births: bool = True,
        clock: Callable[[], datetime] = system_clock,
        ids: Callable[[], UUID] = new_id,
        config: dict[str, Any] | None = None,
    ) -> Runtime:
        """``reuse_births=False`` runs every birth test (the daemon's start,
        ``executors verify``); otherwise a birth passed earlier under the
        same conditions is taken (metnos.runtime.birth_reuse), unless
        METNOS_BIRTH_REUSE=0."""
        workspace = workspace or Workspace.from_config(env_section("workspace"))
        if config is None:
            # send_messages' recipients and bot ([telegram]), find_urls' search endpoint ([web]),
            # the calendars and address books ([calendar], [contacts]), the mail accounts ([mail]).
            config = for_workspace(workspace).settings.executor_config()
        if not workspace.keys_dir.exists():
            msg = f"no Metnos workspace at {workspace.data_dir}; run `metnos init` first"
            raise NotInitialised(msg)
        try:
            verify_key = load_verify_key(workspace)
        except KeyFileError as e:
            msg = f"{e}; run `metnos init` to create the instance keys"
            raise NotInitialised(msg) from None
        log = EventLog(workspace)
        try:
            conditions = BirthConditions.current() if birth else None
            ledger = BirthLedger(log, conditions) if conditions and reuse_births and reuse_allowed() else None
            spawn = sandboxed_birth.make_sandboxed_spawn(workspace) if birth else None
            report = load_executors(workspace, verify_key, birth=birth, now=clock().isoformat(), config=config,
                                    born=ledger.passed if ledger else None, spawn=spawn)
            runtime = cls(workspace, log, report, verify_key, clock=clock, ids=ids, config=config)
            record_boot(log, report, clock, runtime.key_id, births=conditions)
            runtime.seed_mnests_planted = plant_seed_mnests(runtime)
            runtime.refresh()
            runtime.close_orphaned_turns()
        except BaseException:
            log.close()
            raise
        return runtime

    def projections(self) -> dict[str, Any]:
        """Every read model, by name: each can catch up and rebuild from the log."""
        return dict(self._views)

    def refresh(self) -> None:
        for projection in self.projections().values():
            projection.catch_up(self.log)

    def close_orphaned_turns(self) -> OrphanReport:
        """Close the open turns whose writer is gone (see :mod:`metnos.runtime.orphans`)."""
        self.orphans = close_orphaned_turns(self, self.turns.state())
        if self.orphans.closed:
            self.refresh()
        return self.orphans

    def catalogue_state(self) -> dict[str, Any]:
        return self.catalogue.catch_up(self.log)

    def _blocked_reason(self, executor: LoadedExecutor) -> str | None:
        entry = self.catalogue.state()["executors"].get(f"{executor.origin}/{executor.name}")
        if entry is None:
            return None
        version = entry["versions"].get(executor.version)
        # A fused version stays loaded while mnests cite it, and one below threshold
        # until the user decides (seeds/000 ch. 6).
        if version is None or version["state"] in (ACTIVE, "fused", BELOW_THRESHOLD):
            return None
        return version.get("reason") or f"its state is {version['state']}"

    def call(self, name: str, args: dict[str, Any], *, caller: dict[str, Any], version: str | None = None,
             autonomy: str = "supervised") -> Call:
        """One executor run outside a turn (``metnos executors run``, an MCP call), recorded; ``autonomy``
        derives its sandbox profile (metnos/mechanisms/sandbox/autonomy.py)."""
        call = self.invoker.call(name, args, caller=caller, version=version, autonomy=autonomy)
        self._record_quarantine(call)
        if call.invocation is not None:
            self.log.save(call.invocation)
        self.refresh()
        return call

    def record_quarantine(self, call: Call) -> None:
        """A version a call found changed (its files, its MCP server, its tool) is quarantined in the log."""
        self._record_quarantine(call)

    def _record_quarantine(self, call: Call) -> None:
        if call.quarantined is None or call.executor is None:
            return

        lifecycle = Lifecycle(self.log, self.clock, self.key_id)
        lifecycle.record_quarantined(call.quarantined)
        lifecycle.save()

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self.log.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def seed_accounts(settings: Settings) -> dict[str, tuple[str, dict[str, str]]]:
    """What the seeds that hold accounts get from the vault: the mail accounts' passwords and the
    calendars' and address books' (the Invoker's ``seed_secrets``, metnos.runtime.skills.vault)."""
    return {MAIL_SECRETS: (MAIL, settings.mail.secret_names()),
            DAV_SECRETS: (DAV_DRAWER, dav_secret_names(settings.calendar, settings.contacts))}
