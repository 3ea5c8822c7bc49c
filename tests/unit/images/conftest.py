"""The sample PNG as a fixture; the sample files of every format are in tests/imagefiles.py."""

from __future__ import annotations

import pytest

from tests.imagefiles import PNG


@pytest.fixture
def png() -> bytes:
    return PNG
