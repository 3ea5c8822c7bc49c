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
    assert {"TaskPollDeadLetterAlarm", "CallbackDeadLetterAlarm", "Api5xxAlarm", "TextThrottlesAlarm",
            "BackgroundThrottlesAlarm", "TransactionConflictAlarm", "StaleHoldRefundAlarm"} <= set(alarms)
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
        assert table["DeletionPolicy"] == "Retain"
    for secret in of_type(resources, "AWS::SecretsManager::Secret").values():
        assert secret["DeletionPolicy"] == "Retain" and secret["UpdateReplacePolicy"] == "Retain"


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
    assert [s["Fn::If"][0] for s in source[2:]] == ["HasChannelsSecret", "HasChannelKeysSecret", "HasChannelsKmsKey"]
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


def test_the_adapter_layer_follows_region_and_architecture(resources):
    layers = resources["TextFunction"]["Properties"]["Layers"]
    chosen = next(layer for layer in layers if isinstance(layer, dict) and "Fn::If" in layer)
    text = str(chosen)
    assert "${AWS::Region}" in text and "LambdaAdapterLayerArm64" in text and "LambdaAdapterLayerX86" in text


def test_public_url_and_base_path_reach_every_function(resources):
    for name, function in of_type(resources, "AWS::Lambda::Function").items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["GATEWAY_PUBLIC_URL"] == {"Ref": "PublicUrl"}, name
        assert variables["GATEWAY_BASE_PATH"] == {"Ref": "CustomDomainBasePath"}, name
