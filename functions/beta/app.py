"""Beta images: submit a task, read its result from the task store, relay its image by signed link."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from gateway import signing_keys
from gateway.http import authenticate, create_app, json_response, public_base_url, submitted
from gateway.multipart import event_body
from gateway.observability import logger
from gateway.routing.channels import check_at_start
from gateway.tasks import engine
from gateway.tasks.families.beta import FAMILY
from gateway.validation import parse_json

check_at_start()  # an unreadable or bad channels document fails the cold start, naming the cause

signing_keys.load_at_start(signing_keys.RESULT_LINK)  # an unreadable secret fails the cold start

app = create_app()


@app.post("/beta/v1/beta-2-pro")
def submit():
    principal = authenticate(app)

    def answer():
        new = FAMILY.create_task(parse_json(event_body(app.current_event.raw_event)), public_base_url(app))
        return FAMILY.submit_answer(engine.submit(principal, new))

    return submitted(app, principal, answer)


@app.get("/beta/v1/get_result/<task_id>")
def get_result(task_id: str):
    # The spec sends the model in a JSON body (some clients in the query); the id names the task.
    principal = authenticate(app)
    return json_response(FAMILY.query(principal, task_id))


@app.get("/beta/v1/results/<task_id>/sample")
def sample(task_id: str):
    # No key: the signed link is the permission, as with the upstream's own links.
    query = app.current_event.get_query_string_value
    how, served = FAMILY.sample(task_id, query("expires"), query("signature"))
    if how == "redirect":  # the kept copy, by a presigned S3 link: the bytes never pass through here
        return Response(status_code=302, headers={"Location": served, "Cache-Control": "no-store"}, body="")
    data, media_type = served
    return Response(status_code=200, content_type=media_type, body=data,
                    headers={"Cache-Control": "private, max-age=600"})


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
