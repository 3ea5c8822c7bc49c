"""Video (delta, zeta, epsilon): submit a task, read its result from the task store, relay content."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from gateway import observability
from gateway.api import video
from gateway.http import authenticate, create_app, json_response, public_base_url, submitted
from gateway.multipart import event_body
from gateway.routing.channels import check_at_start

check_at_start()  # a bad channels document fails the cold start, naming the field

app = create_app()


@app.post("/v1/video/generations")
def generations():
    principal = authenticate(app)
    return submitted(app, principal, lambda: video.submit_generation(
        principal, event_body(app.current_event.raw_event), public_base_url(app)))


@app.get("/v1/video/generations/result")
def generation_result():
    principal = authenticate(app)
    return json_response(video.generation_result(principal, app.current_event.get_query_string_value("taskid")))


@app.get("/v1/video/results/<task_id>/<index>")
def kept_result(task_id: str, index: str):
    # No key: whoever holds the gateway's signed link may fetch the video (an <video src>, a download).
    query = app.current_event.get_query_string_value
    how, served = video.kept_result(task_id, index, query("expires"), query("signature"))
    return redirect_or_bytes(how, served)


def redirect_or_bytes(how: str, served) -> Response:
    """A redirect to a presigned S3 link (the bytes never pass through this function), or the
    bytes themselves, relayed when no results bucket keeps them."""
    if how == "redirect":
        return Response(status_code=302, headers={"Location": served, "Cache-Control": "no-store"}, body="")
    data, media_type = served
    # Bytes: the resolver base64-encodes them; API Gateway decodes them for a binary media type.
    return Response(status_code=200, content_type=media_type, body=data)


@app.post("/v1/videos")
def create_video():
    principal = authenticate(app)
    return submitted(app, principal,
                     lambda: video.create_video(principal, video.video_request_data(app.current_event.raw_event)))


@app.get("/v1/videos")
def list_videos():
    principal = authenticate(app)
    return json_response(video.list_videos(principal, app.current_event.query_string_parameters))


@app.get("/v1/videos/<video_id>")
def get_video(video_id: str):
    principal = authenticate(app)
    return json_response(video.get_video(principal, video_id))


@app.get("/videos/<videoId>/content")
@app.get("/v1/videos/<videoId>/content")  # where the openai SDK asks for it
def video_content(videoId: str):  # noqa: N803 - the spec's name of the path parameter
    principal = authenticate(app)
    return redirect_or_bytes(*video.video_content(principal, videoId,
                                                  app.current_event.get_query_string_value("variant")))


@observability.lambda_handler(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
