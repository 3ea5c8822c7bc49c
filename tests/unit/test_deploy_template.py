"""template.yaml as CloudFormation receives it: translated by SAM's own translator (no AWS)."""

import pytest

from tests.deploy_support import translate, translated


@pytest.fixture(scope="module")
def resources():
    return translated()["Resources"]


def of_type(resources, kind):
    return {name: r for name, r in resources.items() if r["Type"] == kind}


def test_the_api_has_one_stage_only_on_a_regional_endpoint(resources):
    stages = of_type(resources, "AWS::ApiGateway::Stage")
    assert len(stages) == 1  # no implicit "Stage" stage beside v1
    (stage,) = stages.values()
    assert stage["Properties"]["StageName"] == {"Ref": "StageName"}
    api = of_type(resources, "AWS::ApiGateway::RestApi")["GatewayApi"]
    assert api["Properties"]["EndpointConfiguration"]["Types"] == ["REGIONAL"]


def test_the_stage_is_throttled_from_parameters_and_logs_json_access_lines_without_secrets(resources):
    (stage,) = of_type(resources, "AWS::ApiGateway::Stage").values()
    (setting,) = stage["Properties"]["MethodSettings"]
    assert (setting["ResourcePath"], setting["HttpMethod"]) == ("/*", "*")
    assert (setting["ThrottlingRateLimit"], setting["ThrottlingBurstLimit"]) == (
        {"Ref": "ThrottlingRateLimit"}, {"Ref": "ThrottlingBurstLimit"})
    access = stage["Properties"]["AccessLogSetting"]
    assert '"requestId":"$context.requestId"' in access["Format"]
    assert "authorization" not in access["Format"].lower() and "requestbody" not in access["Format"].lower()
    assert str(access["DestinationArn"]).count("ApiAccessLogGroup") == 1


def test_background_functions_have_reserved_concurrency_and_text_is_bounded(resources):
    functions = of_type(resources, "AWS::Lambda::Function")
    for name in ("TaskPollerFunction", "TaskSweeperFunction", "CallbackSenderFunction"):
        assert functions[name]["Properties"]["ReservedConcurrentExecutions"], name
    bounded = functions["TextFunction"]["Properties"]
    assert bounded["ReservedConcurrentExecutions"] == {"Ref": "TextConcurrency"}
    # images hold an instance up to 15 minutes too (a slow generation): bounded the same way
    images = functions["ImagesFunction"]["Properties"]
    assert images["ReservedConcurrentExecutions"] == {"Ref": "ImagesConcurrency"}
    # the optional parts translate too
    assert "WebAcl" in translate({"WafRateLimit": "2000", "AlarmEmail": "ops@example.com"})["Resources"]


def test_every_function_logs_to_a_group_with_retention(resources):
    groups = of_type(resources, "AWS::Logs::LogGroup")
    for name, function in of_type(resources, "AWS::Lambda::Function").items():
        group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert groups[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name
    assert all(g["Properties"].get("RetentionInDays") for g in groups.values())


def test_alarms_notify_the_topic_and_an_email_parameter_subscribes(resources):
    alarms = of_type(resources, "AWS::CloudWatch::Alarm")
    assert {"TaskPollDeadLetterAlarm", "CallbackDeadLetterAlarm", "Api5xxAlarm", "TransactionConflictAlarm",
            "StaleHoldRefundAlarm"} <= set(alarms)
    assert all(a["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}] for a in alarms.values())
    subscription = resources["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail"
    assert subscription["Properties"]["Endpoint"] == {"Ref": "AlarmEmail"}


def test_tables_have_ttl_and_deletion_protection_and_secrets_are_retained(resources):
    for name in ("AccountsTable", "TasksTable"):
        props = resources[name]["Properties"]
        assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_ttl", "Enabled": True}
    for table in of_type(resources, "AWS::DynamoDB::Table").values():
        assert table["Properties"]["DeletionProtectionEnabled"] is True
    for secret in of_type(resources, "AWS::SecretsManager::Secret").values():
        assert secret["UpdateReplacePolicy"] == "Retain"


def test_a_failed_first_create_leaves_nothing_behind(resources):
    # Whatever is kept when the stack goes is kept only once it was created with it: a first create
    # that fails and rolls back deletes it (RetainExceptOnCreate), rather than leaving tables with
    # deletion protection and secrets behind on every attempt.
    kept = {name: r["DeletionPolicy"] for name, r in resources.items() if r.get("DeletionPolicy", "Delete") != "Delete"}
    assert {"AccountsTable", "TasksTable", "PlantsTable", "CallbackSigningSecret", "ResultLinkSecret"} <= set(kept)
    assert set(kept.values()) == {"RetainExceptOnCreate"}, kept


def test_every_function_has_an_alarm_on_its_errors_and_throttles(resources):
    alarms = of_type(resources, "AWS::CloudWatch::Alarm").values()
    watched: dict[str, set[str]] = {}
    for alarm in alarms:
        for metric in alarm["Properties"].get("Metrics", []):
            stat = metric.get("MetricStat", {}).get("Metric", {})
            if stat.get("Namespace") == "AWS/Lambda":
                (dimension,) = stat["Dimensions"]
                watched.setdefault(dimension["Value"]["Ref"], set()).add(stat["MetricName"])
    functions = of_type(resources, "AWS::Lambda::Function")
    assert {name: watched.get(name) for name in functions} == {name: {"Errors", "Throttles"} for name in functions}


def test_the_alarm_topic_can_receive_alarms_under_a_key_cloudwatch_may_use(resources):
    topic = resources["AlarmTopic"]["Properties"]
    # not the AWS-managed alias/aws/sns key, whose policy cannot be changed to let CloudWatch in
    assert topic["KmsMasterKeyId"] == {"Ref": "AlarmTopicKey"}
    key = resources["AlarmTopicKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    (granted,) = [s for s in key["KeyPolicy"]["Statement"] if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert set(granted["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    (publish,) = resources["AlarmTopicPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert publish["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and publish["Action"] == "sns:Publish"


def test_the_sweeper_is_not_retried_for_hours(resources):
    (config,) = of_type(resources, "AWS::Lambda::EventInvokeConfig").values()
    assert config["Properties"]["FunctionName"] == {"Ref": "TaskSweeperFunction"}
    assert config["Properties"]["MaximumRetryAttempts"] == 0
    assert config["Properties"]["MaximumEventAgeInSeconds"] <= 60


def test_sqs_mappings_never_poll_past_their_consumers_reserved_concurrency(resources):
    functions = of_type(resources, "AWS::Lambda::Function")
    mappings = of_type(resources, "AWS::Lambda::EventSourceMapping").values()
    assert len(mappings) == 2
    for mapping in mappings:
        consumer = functions[mapping["Properties"]["FunctionName"]["Ref"]]["Properties"]
        assert mapping["Properties"]["ScalingConfig"]["MaximumConcurrency"] == consumer["ReservedConcurrentExecutions"]
    from tests.deploy_support import source_template

    assert source_template()["Parameters"]["BackgroundConcurrency"]["MinValue"] == 2  # SQS's own minimum


def test_health_has_a_function_of_its_own_outside_every_capped_pool(resources):
    functions = of_type(resources, "AWS::Lambda::Function")
    permissions = [r for r in of_type(resources, "AWS::Lambda::Permission").values()
                   if "/health" in str(r["Properties"].get("SourceArn"))]
    assert {p["Properties"]["FunctionName"]["Ref"] for p in permissions} == {"HealthFunction"}
    assert "ReservedConcurrentExecutions" not in functions["HealthFunction"]["Properties"]


def test_the_account_wide_api_gateway_role_is_optional_and_outlives_the_stack(resources):
    account = resources["ApiGatewayAccount"]
    assert account["Condition"] == "SetsApiGatewayAccount" and account["DeletionPolicy"] == "RetainExceptOnCreate"
    assert translated()["Conditions"]["SetsApiGatewayAccount"] == {
        "Fn::Equals": [{"Ref": "SetApiGatewayAccountRole"}, "true"]}
    # the stage waits for it only when the stack makes it
    assert resources["GatewayApi"]["DependsOn"] == ["ApiGatewayAccountReady"] or \
        "ApiGatewayAccountReady" in str(resources["GatewayApi"].get("DependsOn"))


def test_queue_visibility_is_six_times_its_consumer_timeout(resources):
    functions = of_type(resources, "AWS::Lambda::Function")
    pairs = {"TaskPollQueue": "TaskPollerFunction", "CallbackQueue": "CallbackSenderFunction"}
    for queue, function in pairs.items():
        assert resources[queue]["Properties"]["VisibilityTimeout"] >= 6 * functions[function]["Properties"]["Timeout"]


def test_the_web_acl_is_optional_with_a_rate_based_rule(resources):
    acl = resources["WebAcl"]
    assert acl["Condition"] == "HasWebAcl" and resources["WebAclAssociation"]["Condition"] == "HasWebAcl"
    rate, bad_inputs = acl["Properties"]["Rules"]
    assert rate["Statement"]["RateBasedStatement"]["Limit"] == {"Ref": "WafRateLimit"}
    assert rate["Statement"]["RateBasedStatement"]["AggregateKeyType"] == "IP"
    assert rate["Action"] == {"Block": {}}
    assert bad_inputs["Statement"]["ManagedRuleGroupStatement"]["Name"] == "AWSManagedRulesKnownBadInputsRuleSet"


def test_every_routing_function_may_read_the_channel_sources_and_nothing_puts_a_key_in_the_template(resources):
    source = resources["ChannelSourcesPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert source[0]["Action"] == "ssm:GetParameter"
    # The keys of the channels added through /api/channel/: one secret each, under the stack's prefix
    assert source[1]["Action"] == "secretsmanager:GetSecretValue"
    assert source[1]["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:"
                                                "${AWS::AccountId}:secret:${AWS::StackName}/channel-keys/*"}
    assert [s["Fn::If"][0] for s in source[2:]] == [
        "ReadsChannelSecrets", "HasChannelsSecret", "HasChannelKeysSecret", "HasChannelsKmsKey"]
    for name in ("TextFunction", "ImagesFunction", "VideoFunction", "AlphaFunction", "BetaFunction",
                 "GammaFunction", "ImgtaskFunction", "TaskPollerFunction", "TaskSweeperFunction"):
        role = resources[resources[name]["Properties"]["Role"]["Fn::GetAtt"][0]]
        assert {"Ref": "ChannelSourcesPolicy"} in role["Properties"]["ManagedPolicyArns"], name
    # No secret is resolved into a function's environment (GetFunctionConfiguration would show it)
    assert "resolve:secretsmanager" not in str(translated())
    for function in of_type(resources, "AWS::Lambda::Function").values():
        names = set(function["Properties"]["Environment"]["Variables"])
        assert not {n for n in names if n.endswith(("_KEY", "_SECRET")) and n != "GATEWAY_CHANNELS_SECRET"
                    and n != "GATEWAY_CHANNEL_KEYS_SECRET"}


def test_the_account_function_reads_the_channel_names_never_their_keys(resources):
    role = resources[resources["AccountFunction"]["Properties"]["Role"]["Fn::GetAtt"][0]]
    policies = [arn["Ref"] for arn in role["Properties"]["ManagedPolicyArns"] if isinstance(arn, dict)]
    assert "ChannelSourcesPolicy" not in policies and "ChannelDocumentPolicy" in policies
    document = str(resources["ChannelDocumentPolicy"]["Properties"]["PolicyDocument"])
    assert "ChannelKeysSecretName" not in document and "ChannelsParameterName" in document
    variables = resources["AccountFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["GATEWAY_CHANNEL_KEYS_NEEDED"] == "false"


def test_the_adapter_layer_follows_the_region_and_every_part_is_built_for_arm64(resources):
    layers = resources["TextFunction"]["Properties"]["Layers"]
    assert resources["ImagesFunction"]["Properties"]["Layers"] == layers  # the other streaming function
    chosen = next(layer for layer in layers if isinstance(layer, dict) and "Fn::If" in layer)
    text = str(chosen)
    assert "${AWS::Region}" in text and "LambdaAdapterLayerArm64" in text and "X86" not in text
    # what is deployed is what is built: no parameter turns the functions to another architecture
    from tests.deploy_support import source_template

    assert "Architecture" not in source_template()["Parameters"]
    for function in of_type(resources, "AWS::Lambda::Function").values():
        assert function["Properties"]["Architectures"] == ["arm64"]
    layer = source_template()["Resources"]["GatewayLayer"]
    assert layer["Metadata"]["BuildArchitecture"] == "arm64"
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_public_url_and_base_path_reach_every_function(resources):
    for name, function in of_type(resources, "AWS::Lambda::Function").items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["GATEWAY_PUBLIC_URL"] == {"Ref": "PublicUrl"}, name
        assert variables["GATEWAY_BASE_PATH"] == {"Ref": "CustomDomainBasePath"}, name


def _vtl_branch(template: str, resource_path: str) -> str:
    """The body a gateway response template gives for `resource_path`: its #if/#elseif chain on
    `$context.resourcePath.startsWith(...)`, as API Gateway's template engine picks a branch."""
    import re

    chosen = None
    for line in template.splitlines():
        condition = re.fullmatch(r'#(?:if|elseif)\(\$context\.resourcePath\.startsWith\("([^"]*)"\)\)', line)
        if condition:
            taking = chosen is None and resource_path.startswith(condition.group(1))
        elif line == "#else":
            taking = chosen is None
        elif line == "#end":
            break
        elif taking:
            chosen = line
    assert chosen is not None
    return chosen


@pytest.mark.parametrize("kind", ["INTEGRATION_FAILURE", "THROTTLED"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1beta/models/{proxy+}",
                                  "/alpha/v1/videos/text2video", "/beta/v1/beta-2-pro", "/gamma/api/v1/tasks/{task_id}",
                                  "/plants", "/api/user/self", "/imgtask/submit/imagine", "/v1/embeddings"])
def test_a_throttle_reaches_the_client_as_429_with_retry_after_in_its_familys_envelope(kind, path):
    import json

    from gateway.errors import RateLimited, dialect_for_path, render
    from tests.deploy_support import source_template

    response = source_template()["Resources"]["GatewayApi"]["Properties"]["GatewayResponses"][kind]
    assert response["StatusCode"] == "429"
    assert response["ResponseParameters"]["Headers"]["retry-after"] == "'1'"
    body = json.loads(_vtl_branch(response["ResponseTemplates"]["application/json"], path)
                      .replace("$context.requestId", "req-1"))
    expected = render(RateLimited(_message(body), code=_code(body)), dialect_for_path(path), "req-1")
    assert body == expected.body


def _message(body: dict) -> str:
    inner = body.get("error") if isinstance(body.get("error"), dict) else body
    return inner.get("message") or inner.get("detail") or inner.get("description")


def _code(body: dict) -> str | None:
    inner = body.get("error")
    return inner.get("code") if isinstance(inner, dict) and isinstance(inner.get("code"), str) else None


def test_a_new_key_cannot_take_the_whole_text_pool_by_default():
    from tests.deploy_support import source_template

    parameters = source_template()["Parameters"]
    per_key = parameters["DefaultKeyMaxParallel"]["Default"]
    assert 0 < per_key <= parameters["TextConcurrency"]["Default"] // 4
    environment = source_template()["Globals"]["Function"]["Environment"]["Variables"]
    assert environment["GATEWAY_DEFAULT_KEY_MAX_PARALLEL"] == {"Ref": "DefaultKeyMaxParallel"}


def test_no_function_may_scan_a_table_nor_change_the_bucket(resources):
    from tests.iam_support import granted

    grants = granted()
    for function, statements in grants.items():
        actions = {a for statement in statements for a in statement}
        assert "dynamodb:Scan" not in actions, function
        # objects only; deleting one only for the Files API's DELETE /v1/files/{id}
        objects = ("s3:GetObject", "s3:PutObject", *(("s3:DeleteObject",) if function == "batches" else ()))
        assert not {a for a in actions if a.startswith("s3:") and a not in objects}, function
        assert "dynamodb:DescribeTable" not in actions, function
    # the sample plant store: on the money table, the key lookup and its last-used stamp only
    plants = {a for statement in grants["plants"] for a in statement}
    assert plants == {"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem"}
