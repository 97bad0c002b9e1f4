"""Where Metnos keeps its things on disk.

Everything lives under the XDG data and config dirs, or all of it under
``$METNOS_HOME`` when that is set (tests set it to a temporary folder).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from domain.errors import MetnosError
from metnos.settings.declare import setting


class WorkspaceConfig(BaseModel):
    """Where the workspace is: the environment only (a config.toml cannot say where it is itself)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    home: str | None = setting(None, "Everything under this one folder (data/ and config/), instead of the XDG dirs.",
                               env="METNOS_HOME", toml=False)
    xdg_data_home: str | None = setting(None, "The XDG data dir (default ~/.local/share); Metnos's data is under metnos/.",
                                        env="XDG_DATA_HOME", toml=False)
    xdg_config_home: str | None = setting(None, "The XDG config dir (default ~/.config); config.toml is in metnos/.",
                                          env="XDG_CONFIG_HOME", toml=False)
    user_home: str | None = setting(None, "The user's home (default: the password database's).", env="HOME", toml=False)


class WorkspaceNotYours(MetnosError):
    """The workspace belongs to another user."""


def _known(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


@dataclass(frozen=True)
class Workspace:
    data_dir: Path
    config_dir: Path

    @classmethod
    def from_config(cls, where: WorkspaceConfig) -> Workspace:
        if where.home:
            root = Path(where.home).expanduser().absolute()
            return cls(data_dir=root / "data", config_dir=root / "config")
        user_home = Path(where.user_home or Path.home())
        data = Path(where.xdg_data_home or user_home / ".local" / "share")
        config = Path(where.xdg_config_home or user_home / ".config")
        return cls(data_dir=data / "metnos", config_dir=config / "metnos")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Workspace:
        """The workspace ``env`` (default the process's environment) points to."""
        env = os.environ if env is None else env
        return cls.from_config(WorkspaceConfig(home=env.get("METNOS_HOME") or None, xdg_data_home=env.get("XDG_DATA_HOME") or None,
                                               xdg_config_home=env.get("XDG_CONFIG_HOME") or None, user_home=env.get("HOME") or None))

    # The log and everything derived from it.
    @property
    def log_dir(self) -> Path:
        return self.data_dir / "log"

    @property
    def views_dir(self) -> Path:
        return self.data_dir / "views"

    @property
    def audit_dir(self) -> Path:
        return self.data_dir / ".audit"

    @property
    def blobs_dir(self) -> Path:
        return self.data_dir / "blobs"

    @property
    def outbox_dir(self) -> Path:
        return self.data_dir / "outbox"

    @property
    def i18n_dir(self) -> Path:
        """The workspace's catalogues: added languages, promoted translations, the drafts in ``_pending``."""
        return self.data_dir / "i18n"

    @property
    def runtime_dir(self) -> Path:
        return self.data_dir / ".runtime"

    # Executors: seed, synthesised and imported live apart, so that a
    # synthesised executor can never shadow a seed of the same name.
    @property
    def executors_dir(self) -> Path:
        return self.data_dir / "executors"

    def executors_origin_dir(self, origin: str) -> Path:
        return self.executors_dir / origin

    # Secrets and settings.
    @property
    def keys_dir(self) -> Path:
        return self.config_dir / "keys"

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    def check_owner(self) -> None:
        """Refuse a workspace that belongs to someone else: writing in it would leave
        files its owner cannot use, and reading it fails half-way."""
        for path in (self.data_dir, self.config_dir):
            try:
                owner = path.stat().st_uid
            except FileNotFoundError:
                continue
            except PermissionError:
                msg = f"cannot look into the workspace at {path}: permission denied; set METNOS_HOME to a workspace of your own"
                raise WorkspaceNotYours(msg) from None
            me = os.geteuid()
            if owner != me:
                msg = (f"the workspace at {path} belongs to {_user(owner)}, not to you ({_user(me)}); "
                       f"run Metnos as {_user(owner)}, or set METNOS_HOME to a workspace of your own")
                raise WorkspaceNotYours(msg)
        self._check_parts_owner()

    def _check_parts_owner(self) -> None:
        """A part of one's own workspace made by another user (a command run once with sudo): the
        stores in it could not be opened, or the files written there used by their owner."""
        me = os.geteuid()
        log, views = self.log_dir, self.views_dir
        for path in (log, log / "data.mdb", log / "lock.mdb", views, views / "data.mdb", views / "lock.mdb",
                     self.blobs_dir, self.keys_dir):
            try:
                owner = path.stat().st_uid
            except OSError:
                continue  # not there (yet), or not to be looked into: opening it says why
            if owner != me:
                name = pwd.getpwuid(me).pw_name if _known(me) else str(me)
                msg = (f"{path}, in your workspace, belongs to {_user(owner)}, not to you ({_user(me)}): a command run as "
                       f"that user made it. Give it back with `sudo chown -R {name} {path}`, then run the command again")
                raise WorkspaceNotYours(msg)

    def forbidden_paths(self) -> list[Path]:
        """Metnos's own paths that no executor may ever see (seeds/000 ch. 5.5)."""
        return [self.config_dir, self.keys_dir, self.log_dir, self.audit_dir, self.views_dir]
