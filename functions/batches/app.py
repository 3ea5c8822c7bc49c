"""The Files and Batch APIs (`/v1/files`, `/v1/batches`): upload (directly, or presigned for a large
file), list, read, delete files; submit, list, read and cancel batches, in OpenAI's shapes. The
rules live in `gateway.api.files`, `gateway.api.uploads` and `gateway.api.batches`; a batch runs
through the task engine (`tasks/families/batch`)."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from gateway.api import batches, files, uploads
from gateway.http import authenticate, create_app, json_response, submitted
from gateway.multipart import event_body
from gateway.observability import logger
from gateway.routing.channels import check_at_start
from gateway.validation import parse_json

check_at_start()  # an unreadable or bad channels document fails the cold start, naming the cause

app = create_app()


@app.post("/v1/files")
def upload_file():
    principal = authenticate(app)
    return submitted(app, principal, lambda: files.upload(principal, app.current_event.raw_event))


@app.post("/v1/files/uploads")
def create_upload():
    principal = authenticate(app)
    # A file larger than a request carries: its record and a presigned POST of its bytes to S3.
    return submitted(app, principal, lambda: uploads.create(principal, parse_json(
        event_body(app.current_event.raw_event))))


@app.get("/v1/files")
def list_files():
    principal = authenticate(app)
    return json_response(files.listing(principal, app.current_event.query_string_parameters))


@app.get("/v1/files/<file_id>")
def get_file(file_id: str):
    principal = authenticate(app)
    return json_response(files.file_object(files.owned(principal, file_id)))


@app.delete("/v1/files/<file_id>")
def delete_file(file_id: str):
    principal = authenticate(app)
    return json_response(files.delete(principal, file_id))


@app.get("/v1/files/<file_id>/content")
def file_content(file_id: str):
    principal = authenticate(app)
    # The bytes by a presigned S3 link of a few minutes: they never pass through this function.
    return Response(status_code=302, headers={"Location": files.content_link(principal, file_id),
                                              "Cache-Control": "no-store"}, body="")


@app.post("/v1/batches")
def create_batch():
    principal = authenticate(app)
    return submitted(app, principal, lambda: batches.create(principal, parse_json(
        event_body(app.current_event.raw_event))))


@app.get("/v1/batches")
def list_batches():
    principal = authenticate(app)
    return json_response(batches.listing(principal, app.current_event.query_string_parameters))


@app.get("/v1/batches/<batch_id>")
def get_batch(batch_id: str):
    principal = authenticate(app)
    return json_response(batches.retrieve(principal, batch_id))


@app.post("/v1/batches/<batch_id>/cancel")
def cancel_batch(batch_id: str):
    principal = authenticate(app)
    return json_response(batches.cancel(principal, batch_id))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
