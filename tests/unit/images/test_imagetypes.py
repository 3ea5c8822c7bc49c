import pytest

from gateway.imagetypes import detect_image_type
from tests.imagefiles import BMP, JPEG, PNG, TIFF_BE, TIFF_LE, WEBP


@pytest.mark.parametrize("data,kind", [
    (PNG, "png"), (JPEG, "jpeg"), (BMP, "bmp"), (TIFF_LE, "tiff"), (TIFF_BE, "tiff"), (WEBP, "webp"),
])
def test_each_accepted_format_is_recognised_from_its_bytes(data, kind):
    assert detect_image_type(data) == kind


@pytest.mark.parametrize("data", [
    b"", b"hello, this is text and not a picture", b"GIF89a\x01\x00\x01\x00",
    b"BMthis only starts like a bitmap......",  # "BM" without a real DIB header
    b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00",  # RIFF, but audio
    b"\x89PNG",  # a truncated signature
    b"%PDF-1.7\n",
])
def test_anything_else_is_not_an_image(data):
    assert detect_image_type(data) is None
