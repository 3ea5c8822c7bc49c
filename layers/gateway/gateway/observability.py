"""One JSON logger for every function (Powertools), with the request id as correlation id."""

from __future__ import annotations

from aws_lambda_powertools import Logger

logger = Logger(service="gateway")
