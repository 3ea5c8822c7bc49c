"""POST /v1/images/generations (JSON) and POST /v1/images/edits (multipart), in the chat dialect."""

from aws_lambda_powertools.logging import correlation_paths

from gateway import observability
from gateway.api import images
from gateway.http import authenticate, create_app, request_id, submitted
from gateway.multipart import event_body, form_from_event
from gateway.routing.channels import check_at_start
from gateway.schemas.images import parse_edit_form, parse_generation_body

check_at_start()  # a bad channels document fails the cold start, naming the field

app = create_app()


def _time_left() -> float | None:
    remaining = getattr(app.lambda_context, "get_remaining_time_in_millis", None)
    return remaining() / 1000 if remaining is not None else None


@app.post("/v1/images/generations")
def generations():
    principal = authenticate(app)
    # As bytes: a body API Gateway base64-encoded need not be UTF-8, and JSON parsing says so.
    request = parse_generation_body(event_body(app.current_event.raw_event))
    return submitted(app, principal,
                     lambda: images.generate(principal, request, request_id(app), time_left=_time_left()))


@app.post("/v1/images/edits")
def edits():
    principal = authenticate(app)
    # API Gateway hands multipart over base64-encoded (a binary media type); this decodes it,
    # answers 413 past the Lambda event limit and 400 for a malformed form.
    request = parse_edit_form(form_from_event(app.current_event.raw_event))
    return submitted(app, principal,
                     lambda: images.edit(principal, request, request_id(app), time_left=_time_left()))


@observability.lambda_handler(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
