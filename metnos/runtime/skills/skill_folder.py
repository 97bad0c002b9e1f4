"""Reading an agentskills.io skill folder: SKILL.md's front matter, its scripts and references.

The format: a folder named like the skill, holding ``SKILL.md`` (YAML front
matter between ``---`` lines, then Markdown instructions), and optionally
``scripts/`` (code the skill runs), ``references/`` (documents read on
demand) and ``assets/``. The front matter's ``name`` is 1-64 lower-case
letters, digits and single hyphens, the folder's name; ``description`` is
1-1024 characters; ``license``, ``compatibility``, ``metadata`` (a map of
strings) and ``allowed-tools`` are optional.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from domain.errors import MetnosError

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_KNOWN_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}


class SkillFormatError(MetnosError):
    """The folder is not a skill Metnos can read: names the file and what is wrong."""


@dataclass(frozen=True)
class Skill:
    dir: Path
    name: str
    description: str
    body: str
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    scripts: tuple[Path, ...] = ()
    references: tuple[Path, ...] = ()


def _files(folder: Path) -> tuple[Path, ...]:
    if not folder.is_dir():
        return ()
    found = []
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            raise SkillFormatError(f"{p}: a symbolic link; a skill's files must be plain files")
        if p.is_file() and "__pycache__" not in p.parts:
            found.append(p)
    return tuple(found)


def read_skill(path: Path) -> Skill:
    path = Path(path).expanduser().absolute()
    md = path / "SKILL.md"
    if not md.is_file():
        raise SkillFormatError(f"{path}: no SKILL.md; an agentskills.io skill is a folder with a SKILL.md")
    try:
        text = md.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SkillFormatError(f"{md}: not valid UTF-8") from None
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError(f"{md}: does not start with a YAML front matter between --- lines")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillFormatError(f"{md}: the front matter has no closing --- line") from None
    try:
        front = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise SkillFormatError(f"{md}: the front matter is not valid YAML{where}") from None
    if not isinstance(front, dict):
        raise SkillFormatError(f"{md}: the front matter must be a mapping of keys")
    unknown = sorted(set(front) - _KNOWN_KEYS)
    if unknown:
        raise SkillFormatError(f"{md}: unknown front-matter keys {unknown} (known: {sorted(_KNOWN_KEYS)})")
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 64:
        raise SkillFormatError(f"{md}: name {name!r} must be 1-64 lower-case letters, digits and single hyphens")
    if name != path.name:
        raise SkillFormatError(f"{md}: name {name!r} does not match the folder's name {path.name!r}")
    if not isinstance(description, str) or not description.strip() or len(description) > 1024:
        raise SkillFormatError(f"{md}: description must be 1-1024 characters")
    metadata = front.get("metadata") or {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise SkillFormatError(f"{md}: metadata must map strings to strings")
    return Skill(
        dir=path, name=name, description=" ".join(description.split()), body="\n".join(lines[end + 1:]),
        license=front.get("license"), compatibility=front.get("compatibility"), metadata=dict(metadata),
        scripts=_files(path / "scripts"), references=_files(path / "references"),
    )
