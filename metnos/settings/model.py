"""Every setting of Metnos, declared once: one pydantic-settings model, a nested model a section.

The sections named in :data:`TOML_SECTIONS` are config.toml's tables; the others come from the
environment only. Each field says its default, its type, what it does, and (its marks, see
metnos.settings.declare) the ``METNOS_*`` variable and the flag that set it. metnos.settings.loader
reads them once per process, in one order: flag > variable > config.toml > default.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from metnos.settings.actors import ActorsConfig
from metnos.settings.calendar import DavSources
from metnos.settings.cascade import CascadeConfig
from metnos.settings.commands import CommandsConfig
from metnos.settings.conversation import ConversationSettings
from metnos.settings.daemon import DaemonConfig
from metnos.settings.errors import (
    ConfigError,
    LLMConfigError,
    NetworkConfigError,
    TelegramConfigError,
)
from metnos.settings.llm_tiers import LLMConfig
from metnos.settings.location import LocationSettings
from metnos.settings.log_store import LogStoreConfig
from metnos.settings.mail import MailConfig
from metnos.settings.model_server import ModelServerConfig
from metnos.settings.network import NetworkConfig, matches
from metnos.settings.process import ProcessConfig
from metnos.settings.runtime import RuntimeConfig
from metnos.settings.telegram import TelegramSettings
from metnos.settings.turn import TurnSettings
from metnos.settings.web import SEARCH_URL_SETTING, WebSettings
from metnos.settings.workspace import WorkspaceConfig

# config.toml's tables, in the order `metnos config check` names them.
TOML_SECTIONS = ("llm", "model", "network", "telegram", "mail", "calendar", "contacts", "daemon", "turn", "runtime", "web", "commands",
                "location", "conversation", "actors")
# The error a section's wrong value raises, as each has always (an ``except`` elsewhere catches it).
SECTION_ERRORS: dict[str, type[Exception]] = {"llm": LLMConfigError, "model": LLMConfigError, "network": NetworkConfigError,
                                              "telegram": TelegramConfigError}


def section_error(name: str) -> type[Exception]:
    return SECTION_ERRORS.get(name, ConfigError)


class Settings(BaseSettings):
    """Every setting in force in one process."""

    # The loader hands every value in, layer by layer: pydantic-settings reads no source of its own,
    # so nothing is read twice or behind the loader's back.
    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    llm: LLMConfig = Field(default_factory=LLMConfig, description="`[llm]`: the embedded model and the LLM tiers.")
    model: ModelServerConfig = Field(default_factory=ModelServerConfig,
                                     description="`[model]`: the embedded model's shared warm server; where "
                                                 "`model install --hf` and `--model ollama:NAME` find models.")
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="`[network]`: the hosts executors may reach.")
    telegram: TelegramSettings = Field(default_factory=TelegramSettings,
                                       description="`[telegram]`: the bot, who may talk to it, send_messages' recipients.")
    mail: MailConfig = Field(default_factory=MailConfig,
                             description="`[mail]`: the accounts read_messages reads and send_messages sends from.")
    calendar: DavSources = Field(default_factory=DavSources,
                                 description="`[calendar]`: the CalDAV calendars and .ics files of read_events, set_events, delete_events.")
    contacts: DavSources = Field(default_factory=DavSources,
                                 description="`[contacts]`: the CardDAV address books and .vcf files of read_contacts.")
    daemon: DaemonConfig = Field(default_factory=DaemonConfig, description="`[daemon]`: the long-running process.")
    turn: TurnSettings = Field(default_factory=TurnSettings, description="`[turn]`: the turn's caps and tunables.")
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig,
                                   description="`[runtime]`: modes, autonomy, the roles beside the proposer, hybrid, the judge.")
    web: WebSettings = Field(default_factory=WebSettings, description="`[web]`: the search endpoint find_urls uses.")
    commands: CommandsConfig = Field(default_factory=CommandsConfig,
                                     description="`[commands]`: which programs run_commands may start (the shell axis).")
    location: LocationSettings = Field(default_factory=LocationSettings, description="`[location]`: where the user is, as get_location returns it.")
    conversation: ConversationSettings = Field(default_factory=ConversationSettings,
                                               description="`[conversation]`: when a follow-up continues a conversation, and what it sees of it.")
    actors: ActorsConfig = Field(default_factory=ActorsConfig,
                                 description="`[actors]`: what the host and the guests may do (autonomy, schedule quotas, what a guest may approve).")
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig, description="Where the workspace is (environment only).")
    process: ProcessConfig = Field(default_factory=ProcessConfig, description="Switches of one process (environment only).")
    cascade: CascadeConfig = Field(default_factory=CascadeConfig, description="The cascade's thresholds (environment only).")
    log: LogStoreConfig = Field(default_factory=LogStoreConfig,
                                description="Which store holds the log: eventsourcing's variables (environment only).")

    @model_validator(mode="after")
    def _search_host_allowed(self) -> Settings:
        # The egress proxy would refuse every search to a host off the list: say so when the settings are read.
        authority = self.web.search_authority()
        if authority is not None and not any(matches(*authority, pattern) for pattern in self.network.allow):
            host, port = authority
            pattern = host if port in (80, 443) else f"{host}:{port}"
            msg = (f"{SEARCH_URL_SETTING}: its host {host} (port {port}) is not on [network] allow; add "
                   f"\"{pattern}\" to [network] allow in config.toml, or unset {SEARCH_URL_SETTING}")
            raise NetworkConfigError(msg)
        return self

    def executor_config(self) -> dict[str, Any]:
        """What executors read from ctx.config: send_messages' recipients and bot, find_urls' search endpoint,
        the mail accounts, the calendars and address books, run_commands' programs, get_location's place."""
        return {**self.telegram.executor_config(), **self.web.executor_config(), **self.mail.executor_config(),
                **self.commands.executor_config(),
                "calendar": self.calendar.executor_config(), "contacts": self.contacts.executor_config(),
                **self.location.executor_config()}

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   *args: Any, **kwargs: Any) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)
