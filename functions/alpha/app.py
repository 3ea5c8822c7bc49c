"""Alpha (`/alpha/v1/...`): five task operations, their queries, custom elements and voices, in
the upstream's envelope `{code, message, request_id, data}` (errors: gateway.errors, ALPHA)."""

from aws_lambda_powertools.logging import correlation_paths

from gateway.http import authenticate, create_app, json_response, request_id, submitted
from gateway.multipart import event_body
from gateway.observability import logger
from gateway.routing.channels import check_at_start
from gateway.tasks.families.alpha import api

check_at_start()  # an unreadable or bad channels document fails the cold start, naming the cause

app = create_app()


def _answer(data):
    return json_response(api.envelope(data, request_id(app)))


def _submit(operation: str):
    principal = authenticate(app)
    return submitted(app, principal, lambda: api.envelope(api.submit(principal, operation,
                                                                     event_body(app.current_event.raw_event)),
                                                          request_id(app)))


@app.post("/alpha/v1/videos/text2video")
def text2video():
    return _submit("text2video")


@app.post("/alpha/v1/videos/image2video")
def image2video():
    return _submit("image2video")


@app.post("/alpha/v1/videos/omni-video")
def omni_video():
    return _submit("omni-video")


@app.post("/alpha/v1/videos/motion-control")
def motion_control():
    return _submit("motion-control")


@app.post("/alpha/v1/images/omni-image")
def omni_image():
    return _submit("omni-image")


@app.get("/alpha/v1/videos/text2video/<task_id>")
def text2video_query(task_id: str):
    principal = authenticate(app)
    return _answer(api.query(principal, "text2video", task_id, app.current_event.headers.get("model"),
                             header_required=True))


def _query(operation: str, task_id: str):
    principal = authenticate(app)
    return _answer(api.query(principal, operation, task_id))


@app.get("/alpha/v1/videos/image2video/<task_id>")
def image2video_query(task_id: str):
    return _query("image2video", task_id)


@app.get("/alpha/v1/videos/omni-video/<task_id>")
def omni_video_query(task_id: str):
    return _query("omni-video", task_id)


@app.get("/alpha/v1/videos/motion-control/<task_id>")
def motion_control_query(task_id: str):
    return _query("motion-control", task_id)


@app.get("/alpha/v1/images/omni-image/<task_id>")
def omni_image_query(task_id: str):
    return _query("omni-image", task_id)


@app.get("/alpha/v1/video/<task_id>")
def general_query(task_id: str):
    principal = authenticate(app)
    return _answer(api.general_query(principal, task_id, app.current_event.get_query_string_value("taskid")))


@app.post("/alpha/v1/general/custom-elements")
def create_element():
    principal = authenticate(app)
    return _answer(api.create_custom(principal, "element", event_body(app.current_event.raw_event)))


@app.get("/alpha/v1/general/custom-elements")
def list_elements():
    principal = authenticate(app)
    return _answer(api.list_custom(principal, "element", app.current_event.get_query_string_value("model_name")))


@app.post("/alpha/v1/general/custom-voices")
def create_voice():
    principal = authenticate(app)
    return _answer(api.create_custom(principal, "voice", event_body(app.current_event.raw_event)))


@app.get("/alpha/v1/general/custom-voices")
def list_voices():
    principal = authenticate(app)
    return _answer(api.list_custom(principal, "voice", app.current_event.get_query_string_value("model_name")))


@app.get("/alpha/v1/general/custom-voices/<voice_id>")
def get_voice(voice_id: str):
    principal = authenticate(app)
    return _answer(api.get_custom(principal, "voice", voice_id,
                                  app.current_event.get_query_string_value("model_name")))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
