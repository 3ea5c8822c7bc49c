"""What the local runner needs from template.yaml: functions, their API routes, queues and schedules.

The template is the one route table: the runner serves exactly the `Api` events declared there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader: yaml.Loader, suffix: str, node: yaml.Node) -> Any:
    """A short-form intrinsic (`!GetAtt A.Arn`) as its long form (`{"Fn::GetAtt": "A.Arn"}`)."""
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        assert isinstance(node, yaml.MappingNode)
        value = loader.construct_mapping(node, deep=True)
    return {"Ref" if suffix == "Ref" else f"Fn::{suffix}": value}


_CfnLoader.add_multi_constructor("!", _tag)


def load_template(path: Path | str) -> dict[str, Any]:
    """template.yaml as it is written, its short-form intrinsics in their long form (what the
    emulator makes its resources from, and what `read_template` reads)."""
    return yaml.load(Path(path).read_text(), Loader=_CfnLoader)


@dataclass(frozen=True)
class Route:
    method: str  # upper case, or ANY
    path: str  # as declared, e.g. /v1beta/models/{proxy+}
    function: str  # logical id
    pattern: re.Pattern = field(compare=False, repr=False)
    specificity: tuple = field(compare=False, repr=False)

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if self.method not in ("ANY", method):
            return None
        found = self.pattern.fullmatch(path)
        return None if found is None else {k: v for k, v in found.groupdict().items()}


@dataclass(frozen=True)
class Function:
    logical_id: str
    code_dir: Path
    handler: str
    streaming: bool  # an ASGI app run by uvicorn under the Lambda Web Adapter
    environment: dict[str, Any]
    queues: tuple[tuple[str, int], ...]  # (queue logical id, batch size) of its SQS events
    schedules: tuple[str, ...]  # schedule expressions of its Schedule events
    partial_batch: bool  # ReportBatchItemFailures


def compile_path(path: str) -> tuple[re.Pattern, tuple]:
    """A regex for an API Gateway resource path; static segments are more specific than
    parameters, and a greedy `{proxy+}` is the least specific."""
    parts, rank = [], []
    for segment in path.strip("/").split("/") if path != "/" else []:
        greedy = re.fullmatch(r"\{(\w+)\+\}", segment)
        param = re.fullmatch(r"\{(\w+)\}", segment)
        if greedy:
            parts.append(f"(?P<{greedy.group(1)}>.+)")
            rank.append(0)
        elif param:
            parts.append(f"(?P<{param.group(1)}>[^/]+)")
            rank.append(1)
        else:
            parts.append(re.escape(segment))
            rank.append(2)
    # DOTALL: a path parameter may hold any decoded character, a newline too, as API Gateway allows.
    # API Gateway (REST) serves a resource at its path with or without one trailing slash.
    return re.compile("/" + "/".join(parts) + ("/?" if parts else ""), re.DOTALL), tuple(rank)


@dataclass
class Template:
    root: Path
    document: dict[str, Any]
    functions: dict[str, Function]
    routes: list[Route]
    binary_media_types: tuple[str, ...]

    def route_for(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            params = route.match(method, path)
            if params is not None:
                return route, params
        return None


def read_template(path: Path | str) -> Template:
    path = Path(path).resolve()
    document = load_template(path)
    resources = document.get("Resources", {})
    function_globals = document.get("Globals", {}).get("Function", {})
    functions: dict[str, Function] = {}
    routes: list[Route] = []
    binary: list[str] = []
    for logical_id, resource in resources.items():
        if resource.get("Type") == "AWS::Serverless::Api":
            binary += [t.replace("~1", "/") for t in resource.get("Properties", {}).get("BinaryMediaTypes", [])]
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource.get("Properties", {})
        events = props.get("Events", {}) or {}
        queues, schedules, streaming = [], [], props.get("Handler") == "run.sh"
        for event in events.values():
            kind, event_props = event.get("Type"), event.get("Properties", {})
            if kind == "Api":
                streaming = streaming or event_props.get("ResponseTransferMode") == "RESPONSE_STREAM"
                pattern, rank = compile_path(event_props["Path"])
                routes.append(Route(method=event_props["Method"].upper(), path=event_props["Path"],
                                    function=logical_id, pattern=pattern, specificity=rank))
            elif kind == "SQS":
                target = event_props["Queue"]["Fn::GetAtt"]
                queue_id = (target if isinstance(target, list) else target.split("."))[0]
                queues.append((queue_id, int(event_props.get("BatchSize", 10))))
            elif kind in ("Schedule", "ScheduleV2"):
                schedules.append(event_props.get("Schedule") or event_props.get("ScheduleExpression"))
        environment = {**function_globals.get("Environment", {}).get("Variables", {}),
                       **props.get("Environment", {}).get("Variables", {})}
        partial = any("ReportBatchItemFailures" in (e.get("Properties", {}).get("FunctionResponseTypes") or [])
                      for e in events.values())
        functions[logical_id] = Function(
            logical_id=logical_id, code_dir=path.parent / props["CodeUri"], handler=props.get("Handler", ""),
            streaming=streaming, environment=environment, queues=tuple(queues), schedules=tuple(schedules),
            partial_batch=partial)
    # API Gateway prefers the most specific resource: compare segment by segment.
    routes.sort(key=lambda r: (r.specificity, r.method != "ANY"), reverse=True)
    return Template(root=path.parent, document=document, functions=functions, routes=routes,
                    binary_media_types=tuple(binary))


def schedule_seconds(expression: str) -> float:
    """Seconds between runs of `rate(N unit)`; cron expressions run every minute locally."""
    found = re.fullmatch(r"rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)", expression.strip())
    if not found:
        return 60.0
    unit = {"minute": 60, "hour": 3600, "day": 86400}[found.group(2).rstrip("s")]
    return int(found.group(1)) * unit
