"""Image tasks (imgtask): submit, list, fetch, image seed, image bytes."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from gateway import signing_keys
from gateway.http import authenticate, create_app, json_response, public_base_url, submitted
from gateway.multipart import event_body
from gateway.observability import logger
from gateway.routing.channels import check_at_start
from gateway.tasks.families.imgtask import operations

check_at_start()  # an unreadable or bad channels document fails the cold start, naming the cause

signing_keys.load_at_start(signing_keys.RESULT_LINK)  # an unreadable secret fails the cold start

app = create_app()


def _body():
    return event_body(app.current_event.raw_event)


@app.post("/imgtask/submit/<kind>")
def submit(kind: str):
    principal = authenticate(app)
    return submitted(app, principal, lambda: operations.submit(principal, kind, _body(), public_base_url(app)))


@app.post("/imgtask/insight-face/swap")
def swap_face():
    principal = authenticate(app)
    return submitted(app, principal,
                     lambda: operations.submit(principal, operations.SWAP, _body(), public_base_url(app)))


@app.post("/imgtask/task/list-by-condition")
def list_by_condition():
    principal = authenticate(app)
    return json_response(operations.list_by_condition(principal, _body(), public_base_url(app)))


@app.get("/imgtask/task/<task_id>/fetch")
def fetch(task_id: str):
    principal = authenticate(app)
    return json_response(operations.fetch(principal, task_id, public_base_url(app)))


@app.get("/imgtask/task/<task_id>/image-seed")
def image_seed(task_id: str):
    principal = authenticate(app)
    return json_response(operations.image_seed(principal, task_id))


@app.get("/imgtask/image/<task_id>")
def image(task_id: str):
    event = app.current_event
    signature = event.get_query_string_value("signature")
    # A signed link (imageUrl) needs no key; otherwise the owner's key.
    principal = None if signature else authenticate(app)
    how, served = operations.image(principal, task_id, expires=event.get_query_string_value("expires"),
                                   signature=signature)
    if how == "redirect":  # the kept copy, by a presigned S3 link: the bytes never pass through here
        return Response(status_code=302, headers={"Location": served, "Cache-Control": "no-store"}, body="")
    data, media_type = served
    # Bytes: the resolver base64-encodes them; API Gateway decodes them for a binary media type.
    return Response(status_code=200, content_type=media_type, body=data,
                    headers={"Cache-Control": "private, max-age=300"})


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
