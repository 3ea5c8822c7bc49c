"""Sample files of every accepted format, and realistic multipart bodies made by httpx."""

from __future__ import annotations

import pytest

from tests.imagefiles import BMP, JPEG, PNG, TIFF_BE, TIFF_LE, WEBP, decode_png, multipart  # noqa: F401


@pytest.fixture
def png() -> bytes:
    return PNG
