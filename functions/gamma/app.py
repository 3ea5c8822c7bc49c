"""Gamma video synthesis: submit a task, read it from the task store, in the upstream's own shape."""

from aws_lambda_powertools.logging import correlation_paths

from gateway.http import authenticate, create_app, json_response, request_id, submitted
from gateway.multipart import event_body
from gateway.observability import logger
from gateway.routing.channels import check_at_start
from gateway.tasks import engine
from gateway.tasks.families.gamma import FAMILY
from gateway.validation import parse_json

check_at_start()  # an unreadable or bad channels document fails the cold start, naming the cause

app = create_app()


@app.post("/gamma/api/v1/services/aigc/video-generation/video-synthesis")
def video_synthesis():
    principal = authenticate(app)

    def answer():
        task = engine.submit(principal, FAMILY.create_task(parse_json(event_body(app.current_event.raw_event))))
        return {"request_id": request_id(app), **FAMILY.submit_answer(task)}

    return submitted(app, principal, answer)


@app.get("/gamma/api/v1/tasks/<task_id>")
def get_task(task_id: str):
    principal = authenticate(app)
    return json_response({"request_id": request_id(app), **FAMILY.query(principal, task_id)})


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
