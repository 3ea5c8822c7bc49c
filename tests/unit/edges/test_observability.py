"""Logs under the function's own service name with no state left from the last request; EMF
metrics per route and model, flushed per invocation or per request."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from gateway import observability
from gateway.errors import InvalidRequest
from tests.conftest import ROOT


def emf_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{") and "_aws" in line]


def metric_names(document: dict) -> list[str]:
    return [m["Name"] for m in document["_aws"]["CloudWatchMetrics"][0]["Metrics"]]


def test_each_function_logs_under_its_template_service_name():
    code = ("from gateway.observability import logger; import logging, sys; "
            "logger.info('hello')")
    env = {"POWERTOOLS_SERVICE_NAME": "images", "POWERTOOLS_LOG_LEVEL": "INFO",
           "PYTHONPATH": str(ROOT / "layers" / "gateway"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["service"] == "images" and line["message"] == "hello"


def test_a_request_starts_with_no_key_of_the_previous_one(monkeypatch):
    written = io.StringIO()
    monkeypatch.setattr(observability.logger.registered_handler, "stream", written)
    observability.begin("/v1/x")
    observability.log_keys(key="key:first", user_id=1)
    observability.logger.warning("first request")
    observability.begin("/v1/y")
    observability.logger.warning("second request")
    first, second = [json.loads(line) for line in written.getvalue().strip().splitlines()[-2:]]
    assert (first["key"], first["user_id"]) == ("key:first", 1)
    assert "key" not in second and "user_id" not in second


def test_metrics_are_written_per_dimension_set_when_flushed(capsys, monkeypatch):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    observability.begin("/v1/chat/completions")
    observability.set_model("m-small")
    observability.upstream_latency(0.25)
    observability.units_billed(42)
    observability.note_error(InvalidRequest("bad"))
    observability.count_answer(400, observability.noted_error_class())
    assert emf_lines(capsys.readouterr().out) == []  # nothing before the flush
    observability.flush()
    documents = emf_lines(capsys.readouterr().out)
    plain = next(d for d in documents if "error_class" not in d)
    assert (plain["route"], plain["model"]) == ("/v1/chat/completions", "m-small")
    assert sorted(metric_names(plain)) == ["Requests", "UnitsBilled", "UpstreamLatency"]
    assert plain["UnitsBilled"] in (42, [42]) and plain["UpstreamLatency"] in (250, [250])
    errors = next(d for d in documents if "error_class" in d)
    assert errors["error_class"] == "invalid_request" and errors["Errors"] in (1, [1])
    observability.flush()
    assert emf_lines(capsys.readouterr().out) == []  # flushed once


def test_metrics_disabled_are_dropped_at_the_flush_without_building_documents(capsys, monkeypatch):
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf import cloudwatch

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setattr(cloudwatch, "AmazonCloudWatchEMFProvider", lambda **_: pytest.fail("a document was built"))
    observability.begin("/v1/chat/completions")
    observability.units_billed(42)
    observability.flush()
    assert emf_lines(capsys.readouterr().out) == []
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED")
    monkeypatch.undo()
    observability.flush()  # dropped, not kept for the next flush
    assert emf_lines(capsys.readouterr().out) == []


def test_a_wrapped_lambda_handler_counts_its_answer_and_flushes(capsys, monkeypatch, lambda_context):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)

    @observability.lambda_handler()
    def handler(event, context):
        observability.set_model("iota-image-1")
        observability.log_keys(key="key:abc")
        return {"statusCode": 201, "body": "{}"}

    handler({"httpMethod": "POST", "resource": "/v1/images/generations", "headers": {}}, lambda_context)
    documents = emf_lines(capsys.readouterr().out)
    assert [(d["route"], d["model"], d["Requests"] in (1, [1])) for d in documents] == [
        ("/v1/images/generations", "iota-image-1", True)]
