"""What a turn may call: the active executors, as the pre-filter and the model see them.

Built once per turn from the loader's verified executors and the catalogue
projection. For executors that take a list (``entries``/``with_entries``),
the model is offered ``from_step``/``with_step`` instead (seeds/002 ch. 7.1):
it names the step whose list to use and never types the list out itself.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from metnos.canonical import canonical_hash
from metnos.executors.loader import LoadedExecutor
from metnos.llm.messages import ToolSpec
from metnos.turn.piping import LIST_REFERENCES
from metnos.turn.prefilter import CatalogueEntry, PrefilterIndex
from metnos.turn.scratchpad import SCRATCHPAD_READ_TOOL

SCRATCHPAD_READ = "scratchpad_read"


@dataclass(frozen=True)
class TurnExecutor:
    loaded: LoadedExecutor
    entry: CatalogueEntry
    tool: ToolSpec

    @property
    def name(self) -> str:
        return self.loaded.name


def tool_parameters(input_schema: dict[str, Any]) -> dict[str, Any]:
    """The input schema as offered to the model: list arguments become step references."""
    schema = copy.deepcopy(input_schema)
    props = schema.get("properties")
    if not isinstance(props, dict):
        return schema
    required = list(schema.get("required", []))
    for ref_arg, list_arg in LIST_REFERENCES:
        if list_arg in props and props[list_arg].get("type") == "array":
            props.pop(list_arg)
            props[ref_arg] = {
                "type": "integer",
                "minimum": 1,
                "description": f"the number of the earlier step whose list to use as {list_arg}",
            }
            if list_arg in required:
                required[required.index(list_arg)] = ref_arg
    if required:
        schema["required"] = required
    schema.pop("$schema", None)
    schema.pop("definitions", None)
    return schema


def _entry(le: LoadedExecutor) -> CatalogueEntry:
    m = le.manifest
    return CatalogueEntry(
        name=le.name,
        version=le.version,
        summary=m.executor.summary,
        descriptions=tuple(sorted(m.description.items())),
        affinity=tuple(m.executor.affinity),
        side_effects=m.contract.side_effects,
        idempotent=m.contract.idempotent,
    )


def _tool(le: LoadedExecutor) -> ToolSpec:
    m = le.manifest
    description = m.description.get("en") or m.executor.summary
    return ToolSpec(name=le.name, description=description, parameters=tool_parameters(le.input_schema))


class TurnCatalogue:
    def __init__(self, executors: list[LoadedExecutor]) -> None:
        ordered = sorted(executors, key=lambda e: e.name)
        self.executors = {le.name: TurnExecutor(le, _entry(le), _tool(le)) for le in ordered}
        self.index = PrefilterIndex([te.entry for te in self.executors.values()]) if ordered else None
        self.entries = [{"name": te.name, "version": te.loaded.version, "digest": te.loaded.digest} for te in self.executors.values()]
        self.digest = canonical_hash(self.entries)

    def __len__(self) -> int:
        return len(self.executors)

    def get(self, name: str) -> TurnExecutor | None:
        return self.executors.get(name)

    def tools(self, names: list[str], *, with_scratchpad: bool) -> list[ToolSpec]:
        tools = [self.executors[n].tool for n in names if n in self.executors]
        if with_scratchpad:
            spec = SCRATCHPAD_READ_TOOL
            tools.append(ToolSpec(name=spec["name"], description=spec["description"], parameters=dict(spec["parameters"])))
        return tools
