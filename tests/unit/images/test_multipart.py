import base64

import pytest

from gateway.errors import InvalidRequest, PayloadTooLarge
from gateway.multipart import MAX_PARTS, MAX_REQUEST_BYTES, event_body, form_from_event, parse_multipart
from tests.imagefiles import PNG, multipart

CT = "multipart/form-data; boundary=XyZ"


def hand_made(*parts: bytes, close: bool = True) -> bytes:
    body = b"".join(b"--XyZ\r\n" + part + b"\r\n" for part in parts)
    return body + (b"--XyZ--\r\n" if close else b"")


def field(name: str, value: bytes) -> bytes:
    return f'Content-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value


def rejected(body: bytes, content_type: str = CT) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_multipart(body, content_type)
    return caught.value


# --- well-formed bodies ------------------------------------------------------------------------

def test_a_form_encoded_by_httpx_gives_back_its_fields_and_file_byte_for_byte():
    # Given a binary file full of CRLFs and dashes, as a real upload has
    tricky = PNG + b"\r\n--\r\n\r\n--not-the-boundary\r\n" + bytes(range(256))
    body, content_type = multipart({"prompt": "a cat, ünïcode", "n": "2"},
                                   {"image": ("photo.jpg", tricky, "image/jpeg")})
    # When it is parsed
    form = parse_multipart(body, content_type)
    # Then every value comes back intact
    assert form.fields == {"prompt": "a cat, ünïcode", "n": "2"}
    upload = form.files["image"]
    assert (upload.filename, upload.content_type, upload.data) == ("photo.jpg", "image/jpeg", tricky)
    assert upload.size == len(tricky)


def test_empty_values_and_empty_files_are_kept():
    body, content_type = multipart({"negative_prompt": ""}, {"image": ("e.png", b"", "image/png")})
    form = parse_multipart(body, content_type)
    assert form.fields == {"negative_prompt": ""} and form.files["image"].data == b""


def test_a_form_with_no_parts_is_empty():
    form = parse_multipart(b"--XyZ--\r\n", CT)
    assert form.fields == {} and form.files == {}


def test_preamble_epilogue_and_transport_padding_are_ignored():
    body = b"preamble text\r\n--XyZ  \r\n" + field("a", b"1") + b"\r\n--XyZ--\r\nepilogue"
    assert parse_multipart(body, CT).fields == {"a": "1"}


def test_data_that_merely_starts_like_the_boundary_is_not_a_delimiter():
    body = hand_made(field("a", b"x\r\n--XyZmore"))
    assert parse_multipart(body, CT).fields == {"a": "x\r\n--XyZmore"}


@pytest.mark.parametrize("content_type", [
    'multipart/form-data; boundary="XyZ"', "Multipart/Form-Data; charset=utf-8; boundary=XyZ",
    "multipart/form-data;boundary=XyZ",
])
def test_content_type_spellings_that_are_allowed(content_type):
    assert parse_multipart(hand_made(field("a", b"1")), content_type).fields == {"a": "1"}


def test_a_part_without_content_type_is_a_file_when_it_has_a_filename():
    part = b'Content-Disposition: form-data; name="image"; filename="x.png"\r\n\r\n' + PNG
    upload = parse_multipart(hand_made(part), CT).files["image"]
    assert upload.content_type == "application/octet-stream" and upload.data == PNG


def test_an_rfc5987_filename_wins_and_is_decoded():
    part = (b"Content-Disposition: form-data; name=\"image\"; filename=\"plain.png\"; "
            b"filename*=UTF-8''caf%C3%A9.png\r\nContent-Type: image/png\r\n\r\n" + PNG)
    assert parse_multipart(hand_made(part), CT).files["image"].filename == "café.png"


def test_a_quoted_filename_with_escapes_is_unquoted():
    body, content_type = multipart(files={"image": ('my "best" photo.png', PNG, "image/png")})
    assert parse_multipart(body, content_type).files["image"].filename == "my %22best%22 photo.png"


# --- malformed bodies --------------------------------------------------------------------------

@pytest.mark.parametrize("content_type,needle", [
    ("application/json", "must be multipart/form-data (got application/json)"),
    ("", "must be multipart/form-data (got none)"),
    ("multipart/mixed; boundary=XyZ", "must be multipart/form-data"),
    ("multipart/form-data", "needs a boundary parameter"),
    ("multipart/form-data; boundary=", "needs a boundary parameter"),
    ("multipart/form-data; boundary=" + "a" * 71, "1 to 70 characters"),
])
def test_a_wrong_content_type_is_refused_with_the_reason(content_type, needle):
    assert needle in rejected(hand_made(field("a", b"1")), content_type).message


def test_a_body_without_its_closing_delimiter_is_refused():
    body, content_type = multipart({"prompt": "x"}, {"image": ("a.png", PNG, "image/png")})
    truncated = body[: body.rindex(b"--")]
    assert "closing boundary delimiter is missing" in rejected(truncated, content_type).message
    assert "closing boundary delimiter is missing" in rejected(hand_made(field("a", b"1"), close=False)).message


def test_a_body_that_never_opens_is_refused():
    assert "opening boundary delimiter is missing" in rejected(b"just some bytes").message


@pytest.mark.parametrize("part,needle", [
    (b"Content-Type: text/plain\r\n\r\nvalue", "no Content-Disposition"),
    (b"\r\nvalue", "no Content-Disposition"),
    (b'Content-Disposition: form-data; filename="a.png"\r\n\r\nvalue', "has no name"),
    (b'Content-Disposition: form-data; name=""\r\n\r\nvalue', "has no name"),
    (b'Content-Disposition: attachment; name="a"\r\n\r\nvalue', "not form-data"),
    (b'Content-Disposition: form-data; name="a"', "not followed by an empty line"),
    (b'Content-Disposition: form-data; name="a"\r\nno colon here\r\n\r\nv', "invalid header line"),
    (b'Content-Disposition: form-data; name="\xff"\r\n\r\nv', "not valid UTF-8"),
])
def test_a_malformed_part_is_refused_with_the_reason(part, needle):
    error = rejected(hand_made(part))
    assert needle in error.message and error.message.startswith("malformed multipart body")


def test_an_empty_part_is_refused():
    assert "no headers" in rejected(b"--XyZ\r\n--XyZ--\r\n").message


def test_a_text_field_sent_twice_is_refused_naming_it():
    error = rejected(hand_made(field("n", b"1"), field("n", b"2")))
    assert error.param == "n" and "more than once" in error.message


def test_a_file_name_sent_twice_keeps_every_file_in_order():
    # Given two files under one name (repeated `image`, the way SDKs send several images)
    body, content_type = multipart(files=[("image", ("a.png", PNG, "image/png")),
                                          ("image", ("b.png", PNG + b"2", "image/png"))])
    # When it is parsed
    form = parse_multipart(body, content_type)
    # Then both are kept, first one first; each form's rules say how many it takes
    assert [f.filename for f in form.files_named("image")] == ["a.png", "b.png"]
    assert form.files["image"].filename == "a.png" and form.files_named("mask") == []


def test_a_text_field_and_a_file_of_one_name_are_refused():
    body, content_type = multipart(fields={"image": "x"}, files=[("image", ("a.png", PNG, "image/png"))])
    assert rejected(body, content_type).param == "image"


def test_a_text_field_that_is_not_utf8_is_refused_naming_it():
    error = rejected(hand_made(field("prompt", b"caf\xe9")))
    assert error.param == "prompt" and "UTF-8" in error.message


def test_too_many_parts_are_refused():
    body = hand_made(*(field(f"f{i}", b"x") for i in range(MAX_PARTS + 1)))
    assert f"more than {MAX_PARTS} parts" in rejected(body).message


# --- API Gateway events and the size rule ------------------------------------------------------

def event(body, *, b64: bool, headers=None, multi=None) -> dict:
    return {"body": body, "isBase64Encoded": b64, "headers": headers, "multiValueHeaders": multi}


def test_a_base64_event_body_is_decoded():
    raw = PNG + b"\x00\xff"
    assert event_body(event(base64.b64encode(raw).decode(), b64=True)) == raw


def test_a_plain_event_body_is_utf8_and_a_missing_one_is_empty():
    assert event_body(event("héllo", b64=False)) == "héllo".encode()
    assert event_body(event(None, b64=False)) == b""


def test_a_body_marked_base64_that_is_not_is_a_400():
    with pytest.raises(InvalidRequest, match="not valid base64"):
        event_body(event("not base64!!", b64=True))


def test_the_largest_accepted_body_passes_and_one_byte_more_is_a_413_that_states_the_limit():
    # Given bodies at and just above the limit, as API Gateway hands them over
    fits = base64.b64encode(b"\x00" * MAX_REQUEST_BYTES).decode()
    too_big = base64.b64encode(b"\x00" * (MAX_REQUEST_BYTES + 3)).decode()
    # Then the first is accepted; the event of the first stays under Lambda's 6 MB with room
    # for headers, and the second is refused with the limit in the message
    assert len(event_body(event(fits, b64=True))) == MAX_REQUEST_BYTES
    assert len(fits) < 6 * 1024 * 1024 - 300 * 1024
    with pytest.raises(PayloadTooLarge) as caught:
        event_body(event(too_big, b64=True))
    assert caught.value.status == 413
    assert str(MAX_REQUEST_BYTES) in caught.value.message and "6 MB" in caught.value.message
    with pytest.raises(PayloadTooLarge):
        event_body(event("x" * (MAX_REQUEST_BYTES + 1), b64=False))


def test_a_form_is_read_from_an_event_whatever_the_header_case():
    body, content_type = multipart({"prompt": "p"}, {"image": ("a.png", PNG, "image/png")})
    encoded = base64.b64encode(body).decode()
    form = form_from_event(event(encoded, b64=True, headers={"content-TYPE": content_type}))
    assert form.fields == {"prompt": "p"} and form.files["image"].data == PNG
    form = form_from_event(event(encoded, b64=True, multi={"Content-Type": [content_type]}))
    assert form.files["image"].filename == "a.png"
    with pytest.raises(InvalidRequest, match="got none"):
        form_from_event(event(encoded, b64=True))
