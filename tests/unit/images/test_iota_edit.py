"""iota edit forms: what the gateway reads from the SDK's shapes and sends upstream; image sizes
and transparency read from the bytes."""

from __future__ import annotations

import httpx
import pytest

from gateway.imagetypes import image_dimensions, png_has_alpha
from gateway.multipart import parse_multipart
from gateway.schemas.images import IotaEditRequest, parse_edit_form
from gateway.upstreams.images import ImagesClient
from gateway_local.simulators.images import png_image
from tests.imagefiles import JPEG, PNG, WEBP, jpeg_of, mask_png, multipart


def parsed(fields: dict, files: list) -> IotaEditRequest:
    body, content_type = multipart({"model": "iota-image-1", "prompt": "p", **fields}, files)
    request = parse_edit_form(parse_multipart(body, content_type))
    assert isinstance(request, IotaEditRequest)
    return request


@pytest.mark.parametrize("name", ["image", "image[]"])
def test_one_or_several_images_under_either_name_are_read_in_order(name):
    request = parsed({}, [(name, ("a.png", PNG, "image/png")), (name, ("b.jpg", jpeg_of(5, 5), "image/jpeg"))])
    assert [i.filename for i in request.image] == ["a.png", "b.jpg"] and request.input_images == 2


def test_the_upstream_gets_image_for_one_image_image_brackets_for_several_then_the_mask():
    one = parsed({}, [("image", ("a.png", PNG, "image/png"))])
    assert [name for name, _ in one.upstream_files()] == ["image"]
    several = parsed({"size": "1024x1024", "n": "2"}, [("image", ("a.png", PNG, "image/png")),
                                                       ("image", ("b.png", PNG, "image/png")),
                                                       ("mask", ("m.png", mask_png(4, 3), "image/png"))])
    assert [name for name, _ in several.upstream_files()] == ["image[]", "image[]", "mask"]
    assert several.input_images == 3
    assert several.upstream_fields() == {"model": "iota-image-1", "prompt": "p", "n": "2", "size": "1024x1024",
                                         "quality": "auto"}


def test_the_upstream_form_carries_every_file_part():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["form"] = parse_multipart(request.read(), request.headers["content-type"])
        return httpx.Response(200, json={"created": 1, "data": [{"b64_json": "eA=="}]})

    request = parsed({}, [("image[]", ("a.png", PNG, "image/png")), ("image[]", ("b.png", PNG, "image/png")),
                          ("mask", ("m.png", mask_png(4, 3), "image/png"))])

    async def call():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            return await ImagesClient("http://up", "sk-up", http).edit(request.upstream_fields(),
                                                                      request.upstream_files())

    import anyio
    anyio.run(call)
    form = seen["form"]
    assert [f.filename for f in form.files_named("image[]")] == ["a.png", "b.png"]
    assert form.files["mask"].data == mask_png(4, 3) and form.fields["model"] == "iota-image-1"


@pytest.mark.parametrize("data,size", [
    (PNG, (4, 3)), (png_image(1536, 1024, (1, 2, 3)), (1536, 1024)), (jpeg_of(640, 480), (640, 480)),
    (WEBP, (1, 1)), (JPEG, None), (b"not an image", None), (PNG[:20], None),
])
def test_the_width_and_height_are_read_from_the_header(data, size):
    assert image_dimensions(data) == size


def test_transparency_is_an_alpha_colour_type_or_a_trns_chunk():
    assert png_has_alpha(mask_png(2, 2)) and not png_has_alpha(mask_png(2, 2, alpha=False))
    assert not png_has_alpha(PNG) and not png_has_alpha(jpeg_of(2, 2))
    with_trns = PNG[:33] + b"\x00\x00\x00\x06tRNS\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + PNG[33:]
    assert png_has_alpha(with_trns)
