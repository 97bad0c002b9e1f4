"""Which store holds the log: eventsourcing's own variables (docs/log.md), declared here, passed through as they are.

LMDB in the workspace is the default. eventsourcing reads these names itself (no ``METNOS_`` prefix);
metnos.mechanisms.eventlog hands it the section as its environment.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from metnos.settings.declare import setting

# A store's own variables (LMDB_PATH, POSTGRES_HOST, SQLITE_DBNAME, ...), passed through by prefix.
STORE_PREFIXES = ("LMDB_", "POSTGRES_", "SQLITE_")


class LogStoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    persistence_module: str | None = setting(None, "eventsourcing's persistence module: metnos.mechanisms.store.lmdb (the "
                                                   "default), eventsourcing.postgres, eventsourcing.sqlite, eventsourcing.popo.",
                                             env="PERSISTENCE_MODULE", toml=False)
    compressor_topic: str | None = setting(None, "eventsourcing's compressor (default zstd).", env="COMPRESSOR_TOPIC", toml=False)
    cipher_topic: str | None = setting(None, "eventsourcing's cipher, to encrypt the stored events.", env="CIPHER_TOPIC",
                                       toml=False)
    cipher_key: str | None = setting(None, "The cipher's key.", env="CIPHER_KEY", toml=False, secret=True)
    transcoder_topic: str | None = setting(None, "eventsourcing's transcoder.", env="TRANSCODER_TOPIC", toml=False)
    store_variables: dict[str, str] = setting(description="Every LMDB_*, POSTGRES_* and SQLITE_* variable, passed to the "
                                                          "store as it is (e.g. LMDB_PATH, POSTGRES_HOST, POSTGRES_PASSWORD).",
                                              toml=False, secret=True, default_factory=dict)

    def as_environment(self) -> dict[str, str]:
        """What eventsourcing is handed: the variables set, by their own names."""
        named = {leaf: getattr(self, field) for field, leaf in _VARIABLES.items() if getattr(self, field) is not None}
        return {**named, **self.store_variables}


_VARIABLES = {"persistence_module": "PERSISTENCE_MODULE", "compressor_topic": "COMPRESSOR_TOPIC", "cipher_topic": "CIPHER_TOPIC",
              "cipher_key": "CIPHER_KEY", "transcoder_topic": "TRANSCODER_TOPIC"}
