"""template.yaml as CloudFormation will see it: translated by SAM's own translator (no AWS)."""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).resolve().parent.parent / "template.yaml"
REGION = "us-east-1"


@lru_cache(maxsize=1)
def source_template() -> dict[str, Any]:
    from gateway_local.template import load_template

    return load_template(TEMPLATE)


class _NoManagedPolicies:
    """The translator asks IAM for managed policy ARNs only for names it does not know: none here."""

    def load(self) -> dict[str, str]:
        return {}


def translate(parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """The translated template; local code paths stand in as S3 locations, as `sam package` makes them."""
    from samtranslator.translator.transform import transform

    template = copy.deepcopy(source_template())
    for resource in template["Resources"].values():
        props = resource.get("Properties") or {}
        for field in ("CodeUri", "ContentUri"):
            if isinstance(props.get(field), str):
                props[field] = f"s3://deploy-bucket/{props[field]}"
    defaults = {name: spec.get("Default") for name, spec in template.get("Parameters", {}).items()
                if "Default" in spec}
    values = {**defaults, **(parameters or {}), "AWS::Region": REGION, "AWS::Partition": "aws",
              "AWS::AccountId": "123456789012", "AWS::StackName": "gateway", "AWS::StackId": "stack-id"}
    return transform(template, values, _NoManagedPolicies())


@lru_cache(maxsize=1)
def translated() -> dict[str, Any]:
    return translate()
