"""The IAM check: every AWS API action a function's code makes, held against its role's grants.

While the suite runs, a botocore `before-call` hook on every client the layer makes
(`gateway.store.aws._new_client`) records each call's IAM actions, attributed to the function
whose code made it: the `functions/<name>/app.py` on the stack (or, for work the text function
runs in threads of its own, its service module `gateway/api/text.py`). Calls made by the tests
themselves (fixtures, direct repository use) belong to no function and are not recorded.

At the end of the session (`tests/conftest.py`, `pytest_sessionfinish`) the recorded actions are
compared with the actions each function's role has in template.yaml as SAM's translator
expands it (policy templates included): a call without a grant always fails the session, naming
the function and the action; a grant (a policy statement) none of whose actions any test used
fails it when the whole integration suite ran (a partial run cannot tell). The statements are
written per function and action (template.yaml: no SAM CRUD templates); the actions that must not
be granted at all (Scan, DescribeTable, bucket settings) are held by
tests/unit/test_deploy_template.py.
"""

from __future__ import annotations

import fnmatch
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS = ROOT / "functions"
TEXT_SERVICE = str(ROOT / "layers" / "gateway" / "gateway" / "api" / "text.py")

#: function folder -> IAM actions (service:Action) its code was seen to make.
recorded: dict[str, set[str]] = defaultdict(set)
_lock = threading.Lock()

# API operations whose IAM action has another name; TransactWriteItems is authorised item by item.
_RENAMED = {
    "dynamodb": {"TransactGetItems": ["GetItem"]},
    "sqs": {"SendMessageBatch": ["SendMessage"], "DeleteMessageBatch": ["DeleteMessage"],
            "ChangeMessageVisibilityBatch": ["ChangeMessageVisibility"]},
    "s3": {"HeadObject": ["GetObject"]},
    # BatchGetSecretValue also needs GetSecretValue on each secret it returns (its own action has no
    # resource-level permission): Secrets Manager API reference, BatchGetSecretValue "Required permissions".
    "secretsmanager": {"BatchGetSecretValue": ["BatchGetSecretValue", "GetSecretValue"]},
}
_TRANSACT_ITEMS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                   "ConditionCheck": "ConditionCheckItem"}


def iam_actions(service: str, operation: str, params: dict[str, Any]) -> list[str]:
    """The IAM actions one API call needs."""
    # SES v2's endpoint prefix is "email"; its IAM actions are "ses:...".
    prefix = {"sqs": "sqs", "dynamodb": "dynamodb", "email": "ses"}.get(service, service)
    if service == "dynamodb" and operation == "TransactWriteItems":
        return sorted({f"{prefix}:{_TRANSACT_ITEMS[kind]}" for item in params.get("TransactItems", [])
                       for kind in item})
    return [f"{prefix}:{name}" for name in _RENAMED.get(service, {}).get(operation, [operation])]


def calling_function() -> str | None:
    """The function folder whose code is on the stack, if any."""
    frame = sys._getframe(2)
    text = False
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(str(FUNCTIONS)):
            return Path(filename).relative_to(FUNCTIONS).parts[0]
        text = text or filename == TEXT_SERVICE
        frame = frame.f_back
    return "text" if text else None


def _record(model: Any, params: dict[str, Any], context: dict[str, Any] | None = None, **_: Any) -> None:
    function = calling_function()
    if function is None:
        return
    service = model.service_model.endpoint_prefix
    actions = iam_actions(service, model.name, params)
    if service == "s3" and model.name == "CreateBucket" and (context or {}).get("is_presign_request"):
        # A presigned POST: botocore builds its parameters on CreateBucket's model (signers.py,
        # generate_presigned_post); the form upload it signs needs s3:PutObject (S3's POST Object).
        actions = ["s3:PutObject"]
    with _lock:
        recorded[function].update(actions)


def install() -> None:
    """Hooks every client the layer makes from now on."""
    from gateway.store import aws

    original = aws._new_client

    def hooked(service: str):
        made = original(service)
        made.meta.events.register("before-call", _record)
        # A presigned link makes no call, but serves only what the signer's role may do: botocore
        # builds its parameters as for the call itself, so they are recorded the same way.
        made.meta.events.register("before-parameter-build.s3", _record)
        return made

    aws._new_client = hooked
    aws.reset_clients()
    _install_bedrock()


def _install_bedrock() -> None:
    """Bedrock channels sign their own HTTP requests with botocore's signer (no botocore client):
    a request signed with the function's own role is recorded as the IAM action its operation
    needs (botocore's service model of bedrock-runtime: Converse and InvokeModel need
    bedrock:InvokeModel, their streams bedrock:InvokeModelWithResponseStream)."""
    from gateway.upstreams import bedrock

    original = bedrock.BedrockClient._request

    def signed(self: Any, method: str, path: str, payload: Any, *, stream: bool) -> Any:
        request = original(self, method, path, payload, stream=stream)
        function = calling_function()
        if function is not None and self._static is None and self._bearer is None:
            streamed = path.endswith(("/converse-stream", "/invoke-with-response-stream"))
            with _lock:
                recorded[function].add(f"bedrock:InvokeModel{'WithResponseStream' if streamed else ''}")
        return request

    bedrock.BedrockClient._request = signed  # type: ignore[method-assign]


def granted() -> dict[str, list[list[str]]]:
    """function folder -> the Allow statements (their IAM actions) of its role's own policies in the
    translated template (managed policies, which serve the Lambda service rather than the code,
    are left out). A policy template of SAM expands to one statement or more."""
    from tests.deploy_support import translated

    resources = translated()["Resources"]
    out: dict[str, list[list[str]]] = {}
    for name, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        role = resources[resource["Properties"]["Role"]["Fn::GetAtt"][0]]
        documents = [policy["PolicyDocument"] for policy in role["Properties"].get("Policies", [])]
        # The template's own managed policies (ChannelSourcesPolicy), not AWS's.
        documents += [resources[arn["Ref"]]["Properties"]["PolicyDocument"]
                      for arn in role["Properties"].get("ManagedPolicyArns", [])
                      if isinstance(arn, dict) and "Ref" in arn]
        statements = out.setdefault(_folder_of(name), [])
        for document in documents:
            for statement in _branches(document["Statement"]):
                if statement.get("Effect") == "Allow":
                    listed = statement["Action"]
                    statements.append([listed] if isinstance(listed, str) else list(listed))
    return out


def _branches(statements: list[Any]) -> list[dict[str, Any]]:
    """The statements, a conditional one (Fn::If) by each branch that is a statement."""
    out = []
    for statement in statements:
        if "Fn::If" in statement:
            out += [s for s in statement["Fn::If"][1:] if isinstance(s, dict) and "Effect" in s]
        else:
            out.append(statement)
    return out


def _folder_of(logical_id: str) -> str:
    from tests.deploy_support import source_template

    return source_template()["Resources"][logical_id]["Properties"]["CodeUri"].split("/", 1)[1]


#: Grants the emulator cannot exercise, each with the reason it is needed on AWS.
UNTESTABLE = {
    # SSM and Secrets Manager decrypt with the caller's kms:Decrypt under a customer-managed key.
    "kms:Decrypt": "decrypting a SecureString or secret under a customer-managed KMS key",
}


def _allows(patterns: list[str], action: str) -> bool:
    return any(fnmatch.fnmatchcase(action.lower(), pattern.lower()) for pattern in patterns)


def problems(whole_suite: bool) -> list[str]:
    """Every call without a grant; with the whole suite run, every grant (a statement) no call used."""
    grants = granted()
    found = []
    for function, actions in sorted(recorded.items()):
        patterns = [p for statement in grants.get(function, []) for p in statement]
        for action in sorted(actions):
            if not _allows(patterns, action):
                found.append(f"function {function} calls {action} without a grant in its role (template.yaml)")
    if whole_suite:
        for function, statements in sorted(grants.items()):
            used = recorded.get(function, set()) | set(UNTESTABLE)
            for statement in statements:
                if not any(_allows(statement, action) for action in used):
                    found.append(f"function {function} is granted {', '.join(statement)} but no test used it")
    return found
