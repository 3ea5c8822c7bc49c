"""What a text request asks of its answer, honoured as the real upstreams do: a JSON value valid
against the schema it gives (`response_format`, the responses API's `text.format`,
`responseMimeType` / `responseSchema` / `responseJsonSchema`), and the tool it lets, makes or
names the model call (`tool_choice` in its three dialects' forms).

Deterministic: the same request gets the same value. A string is the user's words (cut to the
schema's limits), a number the smallest the schema allows, an array as short as it may be, an
object its required properties (all of them when none are marked, as a strict schema does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# A tool is called under `auto` when the user's last words ask for it by name or say `#tool`.
_TOOL = re.compile(r"#tool\b")

_FORMATS = {"date-time": "2026-01-01T00:00:00Z", "date": "2026-01-01", "time": "00:00:00Z",
            "email": "user@example.com", "uri": "https://example.com/", "url": "https://example.com/",
            "uuid": "00000000-0000-4000-8000-000000000000", "ipv4": "192.0.2.1", "ipv6": "2001:db8::1",
            "hostname": "example.com", "duration": "P1D"}


def schema_value(schema: Any, text: str, *, root: Any = None, depth: int = 0) -> Any:
    """A value valid against the JSON Schema `schema` (the OpenAPI subset google uses too:
    upper-case types, `nullable`), built from `text`."""
    root = schema if root is None else root
    if not isinstance(schema, dict) or depth > 32:
        return text
    if "$ref" in schema:
        return schema_value(_resolve(root, schema["$ref"]), text, root=root, depth=depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            options = [s for s in schema[key] if not (isinstance(s, dict) and _type_of(s) == "null")]
            return schema_value((options or schema[key])[0], text, root=root, depth=depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            part = _resolve(root, part["$ref"]) if isinstance(part, dict) and "$ref" in part else part
            if isinstance(part, dict):
                merged = _merge(merged, part)
        return schema_value(_merge(merged, {k: v for k, v in schema.items() if k != "allOf"}), text,
                            root=root, depth=depth + 1)
    kind = _type_of(schema)
    if kind == "object" or (kind is None and "properties" in schema):
        return _object(schema, text, root, depth)
    if kind == "array":
        return _array(schema, text, root, depth)
    if kind in ("integer", "number"):
        return _number(schema, kind)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _string(schema, text)


def _resolve(root: Any, ref: str) -> Any:
    node = root
    for part in ref.removeprefix("#").strip("/").split("/") if ref.startswith("#") else []:
        node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def _merge(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    merged = {**left, **right}
    if "properties" in left and "properties" in right:
        merged["properties"] = {**left["properties"], **right["properties"]}
    if "required" in left and "required" in right:
        merged["required"] = [*left["required"], *[r for r in right["required"] if r not in left["required"]]]
    return merged


def _type_of(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), kind[0] if kind else None)
    return str(kind).lower() if kind is not None else None


def _object(schema: dict[str, Any], text: str, root: Any, depth: int) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    required = schema.get("required")
    extra = schema.get("additionalProperties")
    if not properties and required is None and extra is not False and not extra:
        return {"text": text}  # any object will do: the user's words, under a plain name
    names = [n for n in properties if n in required] if isinstance(required, list) else list(properties)
    value = {name: schema_value(properties[name], text, root=root, depth=depth + 1) for name in names}
    if isinstance(required, list):  # required names with no schema of their own
        value.update({name: text for name in required if name not in value})
    minimum = schema.get("minProperties") or 0
    while len(value) < minimum and extra is not False:
        value[f"property{len(value) + 1}"] = schema_value(extra if isinstance(extra, dict) else {}, text,
                                                          root=root, depth=depth + 1)
    return value


def _array(schema: dict[str, Any], text: str, root: Any, depth: int) -> list[Any]:
    prefix = schema.get("prefixItems") or []
    items = [schema_value(s, text, root=root, depth=depth + 1) for s in prefix]
    count = max(int(schema.get("minItems") or 0), 1 if not prefix else 0)
    item_schema = schema.get("items") if isinstance(schema.get("items"), dict) else {}
    maximum = schema.get("maxItems")
    while len(items) < count and (maximum is None or len(items) < maximum):
        items.append(schema_value(item_schema, text, root=root, depth=depth + 1))
    return items


def _number(schema: dict[str, Any], kind: str) -> int | float:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if isinstance(low, bool) or isinstance(high, bool):  # draft 4's boolean exclusives
        low, high = schema.get("minimum"), schema.get("maximum")
    value: float = low if isinstance(low, int | float) else (min(0, high) if isinstance(high, int | float) else 0)
    if "exclusiveMinimum" in schema and value == schema["exclusiveMinimum"] and not isinstance(value, bool):
        value += 1 if kind == "integer" else 0.5
    step = schema.get("multipleOf")
    if isinstance(step, int | float) and step > 0 and value % step:
        value = (value // step + 1) * step
    if kind == "integer":
        return int(value)
    return value


def _string(schema: dict[str, Any], text: str) -> str:
    if fmt := _FORMATS.get(str(schema.get("format", ""))):
        return fmt
    value = text or "text"
    maximum, minimum = schema.get("maxLength"), schema.get("minLength") or 0
    if isinstance(maximum, int):
        value = value[:maximum]
    if len(value) < minimum:
        value += "x" * (minimum - len(value))
    return value


@dataclass
class Tools:
    """The tools a request offers and how it lets the model use them.

    `choice`: "auto" (the model decides: it calls a tool the user's last words name, or the
    first one on `#tool`), "required" (some tool), "none", or the name of the one tool it must call.
    `user_turn`: the conversation ends with the user's own words (not a tool's result): only then
    does the model call a tool, so an agent's loop ends once its tools have answered."""

    offered: dict[str, Any] = field(default_factory=dict)  # name -> parameters schema
    choice: str = "auto"
    user_turn: bool = True

    def pick(self, prompt: str) -> tuple[str, Any] | None:
        """The tool to call and its parameters schema, or None for a plain answer."""
        if not self.user_turn or self.choice == "none" or (not self.offered and self.choice in ("auto", "required")):
            return None
        if self.choice not in ("auto", "required"):
            return self.choice, self.offered.get(self.choice, {"type": "object"})
        named = [name for name in self.offered if re.search(rf"\b{re.escape(name)}\b", prompt)]
        if named:
            return named[0], self.offered[named[0]]
        if self.choice == "required" or _TOOL.search(prompt):
            first = next(iter(self.offered))
            return first, self.offered[first]
        return None


def strip_tool_directive(text: str) -> str:
    return _TOOL.sub("", text)
