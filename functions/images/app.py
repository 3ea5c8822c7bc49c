"""POST /v1/images/generations (JSON) and POST /v1/images/edits (multipart), in the chat dialect:
an ASGI app run by uvicorn under the Lambda Web Adapter, as the text function, so that a slow
generation is served for up to 15 minutes (kept alive with spaces once it takes longer than the
keep-alive interval) and a large answer streams past Lambda's 6 MB buffered limit.

The routes hand each request to `gateway.api.images`; the shared HTTP side (the request id from
the gateway, the relay, the error mapping) is `gateway.asgi`.
"""

from __future__ import annotations

from gateway import asgi
from gateway.api import images
from gateway.routing.channels import check_at_start

check_at_start()  # a bad channels document fails the cold start, naming the field

app = asgi.application([
    asgi.route(images.GENERATION_ROUTE, images.generations),
    asgi.route(images.EDIT_ROUTE, images.edits),
])
