#!/bin/sh
# The Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap) starts this and relays each
# invocation to the ASGI app over HTTP on $PORT, streaming its answer back.
export PYTHONPATH="/opt/python:${LAMBDA_TASK_ROOT:-.}:${PYTHONPATH}"
exec python -m uvicorn app:app --host 127.0.0.1 --port "${PORT:-8080}" --no-access-log --timeout-graceful-shutdown 0
