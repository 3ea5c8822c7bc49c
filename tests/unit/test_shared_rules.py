"""The link and inline-media rules every family's requests share (text, images, task families)."""

import pytest

from gateway.schemas.shared import base64_data, data_url, http_or_data_url, http_url, mime_type


@pytest.mark.parametrize("value", ["iVBORw0KGgo=", "iVBORw0K-_8", "aGk", "aGVs\nbG8=", "AAAA"])
def test_bare_base64_standard_or_url_safe_padded_or_not_is_accepted(value):
    assert base64_data(value) == value


@pytest.mark.parametrize("value, rule", [
    ("", "non-empty base64"), ("   ", "non-empty base64"), ("not base64!", "non-empty base64"),
    ("aGVsb", "non-empty base64"),  # 1 mod 4: no decoder can read it
    ("aGk===", "non-empty base64"), ("data:image/png;base64,aGk=", "not a data: URL"),
])
def test_anything_else_is_refused_with_its_rule(value, rule):
    with pytest.raises(ValueError, match=rule):
        base64_data(value)


def test_a_link_is_http_or_https_with_a_host():
    assert http_url("https://img.example/cat.png")
    for bad in ("ftp://img.example/cat.png", "https://", "img.example/cat.png"):
        with pytest.raises(ValueError, match="http or https URL"):
            http_url(bad)


def test_a_data_url_carries_a_media_type_and_base64_data():
    assert data_url("data:image/png;base64,iVBORw0KGgo=", "image")
    assert http_or_data_url("data:application/pdf;name=a.pdf;base64,JVBERi0=")
    with pytest.raises(ValueError, match="data:image/<format>"):
        data_url("data:text/plain;base64,aGk=", "image")
    with pytest.raises(ValueError, match="base64 data"):
        data_url("data:image/png;base64,***")
    with pytest.raises(ValueError, match=r"http\(s\) URL or a data: URL"):
        http_or_data_url("data:image/png,raw")


def test_a_mime_type_is_type_slash_subtype():
    assert mime_type("video/mp4")
    with pytest.raises(ValueError, match="MIME type"):
        mime_type("png")
