"""The executor manifest (`manifest.toml`): its model and how it is read.

The manifest is the identity document of an executor (seeds/000 ch. 4): who it
is, what it promises (contract), what it needs (capabilities) and how much
it may use (caps). The effective sandbox profile is derived from it here, in
one place, so that signing and verification compute the same lock.
"""

from __future__ import annotations

import re
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from domain.remote import DEVICE_NAME
from metnos.mechanisms.sandbox.netallow import NETWORK_ALLOW, valid_pattern
from metnos.mechanisms.sandbox.profile import SandboxProfile

# The closed vocabulary of seeds/002 section 4-bis, with each verb's place in
# the pipeline shape E+ (F | A)?.
VERB_CATEGORY: dict[str, Literal["E", "F", "A"]] = {
    **dict.fromkeys(
        ["read", "find", "list", "get", "filter", "sort", "group", "classify", "compute", "compare", "extract"],
        "E",
    ),
    **dict.fromkeys(["describe", "render"], "F"),
    **dict.fromkeys(
        ["move", "delete", "send", "share", "write", "set", "create", "change", "order", "compress", "run"],
        "A",
    ),
}

# The verbs of category A that only add to the world (a message sent, a file created
# beside the others): everything else that acts may overwrite or remove what was there.
ADDITIVE_VERBS = frozenset({"send", "share", "create", "order"})

ORIGINS = ("seed", "synt", "skill", "mcp")

_SOURCE_HASH = re.compile(r"^sha256:[0-9a-f]{16}$")
_NAME_RE = re.compile(r"^([a-z]+)_[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
# Semver 2.0.0, without leading zeros in the numeric parts.
_SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_CREATED_BY_RE = re.compile(r"^(seed|synt:[A-Za-z0-9_.-]+|skill:\S+|mcp:[a-z][a-z0-9_-]*)$")
_ERROR_CLASS_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# One lower-case word, or several separated by single spaces: the multi-word
# tags of seeds/002 ch. 5 ("tell someone"), matched only whole.
_TAG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*(?: [a-z0-9][a-z0-9_-]*)*$")
# A schema reference is "<file>#<json pointer>"; the file is always the
# signed schema.json, never anything else an attacker could drop in the dir.
_SCHEMA_REF_RE = re.compile(r"^schema\.json#(/[^#]*)?$")


class ManifestError(Exception):
    """A manifest that cannot be read or does not validate.

    ``file`` and ``line`` say where; ``field`` says which field for validation
    errors. ``str()`` is the one-line reason shown to the user.
    """

    def __init__(self, file: str, message: str, *, line: int | None = None, column: int | None = None,
                 field: str | None = None) -> None:
        self.file = file
        self.message = message
        self.line = line
        self.column = column
        self.field = field
        where = file
        if line is not None:
            where += f":{line}" + (f":{column}" if column is not None else "")
        if field is not None:
            where += f" [{field}]"
        super().__init__(f"{where}: {message}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Identity(_Strict):
    name: str
    version: str
    created_at: datetime
    created_by: str
    summary: str = Field(min_length=1, max_length=300)
    # Words the pre-filter matches user requests against (seeds/002 ch. 5).
    affinity: tuple[str, ...] = Field(min_length=1)
    # The paired device it runs on (docs/remote.md); None: here, on this machine.
    device: str | None = None

    @field_validator("device")
    @classmethod
    def _device_name(cls, v: str | None) -> str | None:
        if v is not None and not DEVICE_NAME.match(v):
            raise ValueError(f"device {v!r} is not a paired device's name (lower-case letters, digits and dashes, "
                             "as `metnos devices list` shows it)")
        return v

    @field_validator("name")
    @classmethod
    def _name_in_vocabulary(cls, v: str) -> str:
        m = _NAME_RE.match(v)
        if not m:
            raise ValueError(f"name {v!r} is not verb_object in lower snake case")
        if m.group(1) not in VERB_CATEGORY:
            raise ValueError(f"verb {m.group(1)!r} of {v!r} is not in the closed vocabulary")
        return v

    @field_validator("version")
    @classmethod
    def _semver(cls, v: str) -> str:
        if not _SEMVER_RE.match(v):
            raise ValueError(f"version {v!r} is not semver (MAJOR.MINOR.PATCH)")
        return v

    @field_validator("created_at")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("created_at needs a timezone offset (e.g. 2026-05-01T00:00:00Z)")
        return v

    @field_validator("created_by")
    @classmethod
    def _origin_tag(cls, v: str) -> str:
        if not _CREATED_BY_RE.match(v):
            raise ValueError(f"created_by {v!r} must be 'seed', 'synt:<run_id>', 'skill:<source>' or 'mcp:<server>'")
        return v

    @field_validator("affinity")
    @classmethod
    def _tags(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in v if not _TAG_RE.match(t)]
        if bad:
            raise ValueError(f"affinity tags must be lower-case words (several separated by one space), got {bad}")
        return v


class Contract(_Strict):
    input_schema: str = "schema.json#/definitions/Input"
    output_schema: str = "schema.json#/definitions/Output"
    error_classes: tuple[str, ...] = ()
    idempotent: bool
    side_effects: bool
    # What, besides its arguments, its output depends on: "time" (a clock) or
    # "world" (the network, other people's files). A re-execution then
    # compares the output's shape (keys and types), not its values.
    output_varies: Literal["time", "world"] | None = None

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _ref(cls, v: str) -> str:
        if not _SCHEMA_REF_RE.match(v):
            raise ValueError(f"{v!r} must point into schema.json, e.g. 'schema.json#/definitions/Input'")
        return v

    @field_validator("error_classes")
    @classmethod
    def _classes(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [c for c in v if not _ERROR_CLASS_RE.match(c)]
        if bad:
            raise ValueError(f"error classes must be CamelCase identifiers, got {bad}")
        if len(set(v)) != len(v):
            raise ValueError("error classes must be unique")
        return v


def _path_hints(v: tuple[str, ...]) -> tuple[str, ...]:
    for hint in v:
        if not hint or "\x00" in hint:
            raise ValueError(f"bad path hint {hint!r}")
        # The vocabulary the sandbox expands (metnos.mechanisms.sandbox.hints).
        if not (hint.startswith("/") or hint == "~" or hint.startswith("~/")
                or any(hint == v or hint.startswith(v + "/") for v in ("$HOME", "$WORKSPACE"))):
            raise ValueError(f"path hint {hint!r} must be absolute or start with ~, $HOME or $WORKSPACE")
        if ".." in Path(hint).parts:
            raise ValueError(f"path hint {hint!r} must not contain '..'")
    return v


class Capabilities(_Strict):
    """What the executor asks for; the sandbox decides what it gets."""

    fs_read: tuple[str, ...] = Field(default=(), alias="fs:read")
    fs_write: tuple[str, ...] = Field(default=(), alias="fs:write")
    network: tuple[str, ...] = ()
    code_exec: tuple[str, ...] = Field(default=(), alias="code:exec")
    time_read: bool = Field(default=False, alias="time:read")
    # Names of environment variables passed through (e.g. a token's name).
    env: tuple[str, ...] = ()
    # Import the runtime's installed packages; stdlib-only executors say no.
    site_packages: bool = Field(default=False, alias="python:site-packages")
    # fs:write is a ceiling: a call binds writable only the paths its arguments marked as written
    # name (within it), nothing when it names none, so undo's before-image covers all it may change.
    fs_write_arguments: bool = Field(default=False, alias="fs:write:arguments")

    @field_validator("fs_read", "fs_write")
    @classmethod
    def _fs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _path_hints(v)

    @field_validator("network")
    @classmethod
    def _hosts(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [h for h in v if not valid_pattern(h)]
        if bad:
            raise ValueError(f"network hosts must be host names or IPs with an optional :port or :*, '*', "
                             f"or {NETWORK_ALLOW}, got {bad}")
        return v

    @field_validator("code_exec")
    @classmethod
    def _binaries(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [b for b in v if not b or "\x00" in b or ".." in Path(b).parts]
        if bad:
            raise ValueError(f"bad binary names {bad}")
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [e for e in v if not re.match(r"^[A-Z_][A-Z0-9_]*$", e)]
        if bad:
            raise ValueError(f"env names must be UPPER_SNAKE, got {bad}")
        return v


class Caps(_Strict):
    max_duration_s: float = Field(default=10.0, gt=0, le=3600)
    max_cpu_s: float | None = Field(default=None, gt=0)
    max_memory_mb: int = Field(default=256, gt=0, le=65536)
    max_output_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    max_pids: int = Field(default=16, gt=0, le=4096)


class Example(_Strict):
    description: str = Field(min_length=1)
    args: dict[str, Any]


class Manifest(_Strict):
    executor: Identity
    # Per-language descriptions for the planner: {"en": ..., "it": ...}.
    description: dict[str, str]
    # Per translation, the source hash of the English it was made from (``sha256:`` and 16 hex digits, as the
    # i18n catalogue's): a translation whose English changed since, or that names none, is stale and not said.
    translated_from: dict[str, str] = {}
    contract: Contract
    capabilities: Capabilities = Capabilities()
    caps: Caps = Caps()
    examples: tuple[Example, ...] = Field(default=(), alias="examples")

    @field_validator("description")
    @classmethod
    def _languages(cls, v: dict[str, str]) -> dict[str, str]:
        if "en" not in v:
            raise ValueError("a description in English ('en') is required")
        bad = [k for k in v if not re.match(r"^[a-z]{2}(-[A-Z]{2})?$", k)]
        if bad:
            raise ValueError(f"description keys must be language codes, got {bad}")
        empty = [k for k, text in v.items() if not text.strip()]
        if empty:
            raise ValueError(f"empty description for {empty}")
        return v

    @model_validator(mode="after")
    def _translations_named(self) -> Manifest:
        unknown = sorted(set(self.translated_from) - (set(self.description) - {"en"}))
        if unknown:
            raise ValueError(f"translated_from names {unknown}, which [description] does not translate")
        bad = sorted(k for k, v in self.translated_from.items() if not _SOURCE_HASH.match(v))
        if bad:
            raise ValueError(f"translated_from of {bad} is not a source hash: 'sha256:' and the first 16 hex "
                             "digits of the SHA-256 of the English description it translates")
        return self

    @model_validator(mode="after")
    def _coherent(self) -> Manifest:
        # Writing files is a side effect whatever the manifest claims; a
        # manifest that says otherwise would dodge the reinforced check.
        if self.capabilities.fs_write and not self.contract.side_effects:
            raise ValueError("capabilities grant fs:write but contract.side_effects is false")
        if self.capabilities.fs_write_arguments and not self.capabilities.fs_write:
            raise ValueError("fs:write:arguments narrows fs:write, which grants nothing")
        if self.verb_category == "A" and not self.contract.side_effects:
            raise ValueError(f"verb {self.verb!r} changes the world: contract.side_effects must be true")
        return self

    @property
    def name(self) -> str:
        return self.executor.name

    @property
    def version(self) -> str:
        return self.executor.version

    @property
    def device(self) -> str | None:
        """The paired device the executor runs on; None: on this machine."""
        return self.executor.device

    @property
    def verb(self) -> str:
        return self.executor.name.split("_", 1)[0]

    @property
    def verb_category(self) -> Literal["E", "F", "A"]:
        return VERB_CATEGORY[self.verb]

    @property
    def may_destroy(self) -> bool:
        """Whether a call may overwrite or remove what was there (MCP's ``destructiveHint``)."""
        return self.contract.side_effects and self.verb not in ADDITIVE_VERBS

    @property
    def origin(self) -> str:
        return self.executor.created_by.split(":", 1)[0]

    def sandbox_profile(self) -> SandboxProfile:
        """The effective profile: capabilities plus caps, nothing else."""
        cap, lim = self.capabilities, self.caps
        return SandboxProfile(
            fs_read=tuple(sorted(set(cap.fs_read))),
            fs_write=tuple(sorted(set(cap.fs_write))),
            network_hosts=tuple(sorted(set(cap.network))),
            binaries=tuple(sorted(set(cap.code_exec))),
            time_read=cap.time_read,
            site_packages=cap.site_packages,
            env=tuple(sorted(set(cap.env))),
            max_duration_s=lim.max_duration_s,
            max_cpu_s=lim.max_cpu_s,
            max_memory_mb=lim.max_memory_mb,
            max_output_bytes=lim.max_output_bytes,
            max_pids=lim.max_pids,
        )


_TOML_POS_RE = re.compile(r"\(at line (\d+), column (\d+)\)")


def _toml_position(exc: tomllib.TOMLDecodeError, text: str) -> tuple[int | None, int | None]:
    # Python 3.14 adds lineno/colno; before that the position is only in the
    # message, and "end of document" means the last line.
    line = getattr(exc, "lineno", None)
    if line is not None:
        return line, getattr(exc, "colno", None)
    m = _TOML_POS_RE.search(str(exc))
    if m:
        return int(m.group(1)), int(m.group(2))
    if "end of document" in str(exc):
        return text.count("\n") + 1, None
    return None, None


def _field_path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "<root>"


def parse_manifest(data: bytes, file: str = "manifest.toml") -> Manifest:
    """Parse and validate manifest bytes; every failure is a ManifestError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ManifestError(file, "not valid UTF-8", line=line) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, col = _toml_position(exc, text)
        reason = _TOML_POS_RE.sub("", str(exc)).strip()
        raise ManifestError(file, f"malformed TOML: {reason}", line=line, column=col) from None
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = len(exc.errors()) - 1
        msg = first["msg"] + (f" (and {more} more)" if more else "")
        raise ManifestError(file, msg, field=_field_path(first["loc"])) from None


def load_manifest(path: Path | str) -> Manifest:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(str(path), f"cannot read: {exc.strerror}") from None
    return parse_manifest(data, str(path))
