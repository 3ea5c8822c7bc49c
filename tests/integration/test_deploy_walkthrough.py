"""docs/deploying.md followed as written, against the emulator and the template as SAM translates it.

Step 1's commands (the keys secret, the channels document from its heredoc, the SSM parameter)
run as the AWS CLI would make them; step 2's `make deploy` is SAM's translation of template.yaml
with samconfig.toml's parameters (what `sam deploy` passes), which gives the text function its
environment and its role; step 3's `make admin` lines run the admin command line with their
ARGS against a stack carrying the template's parameters and outputs, and its `curl` is sent to
the text function. The only change to the docs' text: the channel's base URL points at the chat
simulator on 127.0.0.1 instead of api.openai.com (tests never reach the internet).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from typing import Any

import httpx
import pytest

from gateway.admin import main as admin_main
from gateway.store.aws import client
from gateway_local.server import simulators_app
from tests.conftest import ROOT, load_function, serve_asgi, use_environment
from tests.deploy_support import source_template, translate

DOCS = (ROOT / "docs" / "deploying.md").read_text()
STACK = "unified-ai-gateway"


def shell_blocks(section: str) -> list[str]:
    """The ```sh blocks of the docs section whose heading starts with `section`, lines joined."""
    body = DOCS.split(f"\n## {section}", 1)[1].split("\n## ", 1)[0]
    return [block.replace("\\\n", " ") for block in re.findall(r"```sh\n(.*?)```", body, re.S)]


def aws_cli(command: str, files: dict[str, str]) -> None:
    """The two AWS CLI commands of step 1, made as the CLI makes them."""
    words = shlex.split(command)
    options = {words[i][2:]: words[i + 1] for i in range(3, len(words) - 1) if words[i].startswith("--")}
    value = options.get("value", "")
    if value.startswith("file://"):
        value = files[value.removeprefix("file://")]
    match words[1:3]:
        case ["secretsmanager", "create-secret"]:
            client("secretsmanager").create_secret(Name=options["name"], SecretString=options["secret-string"])
        case ["ssm", "put-parameter"]:
            client("ssm").put_parameter(Name=options["name"], Type=options["type"], Value=value)
        case _:
            raise AssertionError(f"step 1 has a command this walkthrough does not know: {command}")


def deploy_parameters() -> dict[str, str]:
    """What `make deploy` (sam deploy with samconfig.toml) passes as parameter overrides."""
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    overrides = config["default"]["deploy"]["parameters"]["parameter_overrides"]
    return dict(word.split("=", 1) for word in shlex.split(overrides))


def function_environment(resources: dict[str, Any], name: str, parameters: dict[str, str]) -> dict[str, str]:
    """A function's environment as deployed: its variables with the parameters' values."""
    defaults = {k: str(v.get("Default", "")) for k, v in source_template()["Parameters"].items()}
    values = {**defaults, **parameters}
    out = {}
    for variable, value in resources[name]["Properties"]["Environment"]["Variables"].items():
        if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in values:
            out[variable] = values[value["Ref"]]
        elif isinstance(value, str):
            out[variable] = value
    return out


def admin(args: str, capsys) -> dict[str, Any]:
    capsys.readouterr()  # what came before (the functions' metric lines) is not this command's output
    saved = dict(os.environ)
    try:
        code = admin_main(shlex.split(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return json.loads(printed.out)


@pytest.fixture
def simulator():
    with serve_asgi(simulators_app()) as url:
        yield url


def test_the_deploy_guide_works_as_written(store, simulator, capsys, monkeypatch):
    from gateway.settings import get_settings

    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "0")
    # Step 1: the keys secret, the channels document, its parameter
    (step1,) = shell_blocks("1.")
    heredoc = re.search(r"cat > (\S+) <<'YAML'\n(.*?)\nYAML\n", step1, re.S)
    assert heredoc, "step 1 writes channels.yaml from a heredoc"
    document = heredoc.group(2).replace("https://api.openai.com", f"{simulator}/chat")
    files = {heredoc.group(1): document}
    for command in step1.replace(heredoc.group(0), "").splitlines():
        if command.strip():
            aws_cli(command.strip(), files)

    # Step 2: `make deploy` = sam deploy with samconfig's parameters, over the translated template
    assert re.search(r"^deploy: build\n\t\$\(SAM\) deploy$", (ROOT / "Makefile").read_text(), re.M)
    parameters = deploy_parameters()
    assert parameters["ChannelKeysSecretName"] == "unified-ai-gateway/channel-keys"  # the recommended option
    resources = translate(parameters)["Resources"]
    environment = function_environment(resources, "TextFunction", parameters)
    assert environment["GATEWAY_CHANNEL_KEYS_SECRET"] == "unified-ai-gateway/channel-keys"
    # the stack: its parameters and the outputs step 3 reads
    accounts_table = get_settings().accounts_table
    client("cloudformation").create_stack(StackName=STACK, Parameters=[
        {"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()], TemplateBody=json.dumps({
            "Parameters": {k: {"Type": "String"} for k in parameters},
            "Resources": {"Alarms": {"Type": "AWS::SNS::Topic"}},
            "Outputs": {"ApiUrl": {"Value": "https://api.example/v1"},
                        "AccountsTableName": {"Value": accounts_table}}}))

    # The text function starts with that environment (a cold start reads the channels) ...
    saved = use_environment(**{"GATEWAY_CHANNELS_FILE": None, "GATEWAY_SIMULATOR_URL": None,
                               "GATEWAY_CHANNELS_SECRET": None, **{k: environment.get(k) or None for k in (
                                   "GATEWAY_CHANNELS_PARAMETER", "GATEWAY_CHANNEL_KEYS_SECRET")}})
    try:
        text = load_function("text")
        # Step 3: a user, a key, the chat call
        (step3,) = shell_blocks("3.")
        url = next(o["OutputValue"] for o in client("cloudformation").describe_stacks(StackName=STACK)
                   ["Stacks"][0]["Outputs"] if o["OutputKey"] == "ApiUrl")
        assert "Stacks[0].Outputs[?OutputKey=='ApiUrl'].OutputValue" in step3 and url
        creations = re.findall(r'make admin ARGS="([^"]*)"', step3)
        user = admin(creations[0], capsys)
        assert user["user_id"] == 1  # the docs' issue-key names user 1: the first user of a fresh stack
        key = admin(creations[1], capsys)["key"]
        curl = re.search(r"curl .*", step3).group(0)
        words = shlex.split(curl)
        headers = dict(words[i + 1].split(": ", 1) for i, w in enumerate(words) if w == "-H")
        headers["Authorization"] = headers["Authorization"].replace("sk-...", key)
        body = words[words.index("-d") + 1]
        with serve_asgi(text.app) as gateway:
            answer = httpx.post(f"{gateway}/v1/chat/completions", headers=headers, content=body, timeout=30)
        assert answer.status_code == 200, answer.text
        completion = answer.json()
        assert completion["object"] == "chat.completion" and completion["choices"][0]["message"]["content"]
        # billed at the example's price, under the quota step 3 gave the user
        shown = admin(f"--stack {STACK} list-users", capsys)
        (ann,) = [u for u in shown["users"] if u["username"] == "ann"]
        assert 0 < 5 * 500_000 - ann["quota"] < 5 * 500_000
        # and the operator's channel list reads the channels (with their keys in a secret)
        listed = admin(f"--stack {STACK} channels", capsys)
        assert [c["name"] for c in listed["channels"]] == ["main-chat"]
    finally:
        use_environment(**saved)
