import asyncio

import pytest

from gateway.sse import DONE, SSEEvent, SSEParser, aiter_events, encode


def test_encode_dict_is_compact_json_with_event_name_and_blank_line():
    assert encode({"a": 1, "b": "é"}, event="ping") == 'event: ping\ndata: {"a":1,"b":"é"}\n\n'.encode()


def test_encode_multiline_text_uses_one_data_field_per_line():
    assert encode("one\ntwo") == b"data: one\ndata: two\n\n"
    assert SSEParser().feed(encode("one\r\ntwo")) == [SSEEvent(None, "one\ntwo")]


def test_done_marker():
    assert DONE == b"data: [DONE]\n\n"
    assert SSEParser().feed(DONE)[0].is_done


def test_parser_joins_multiline_data_and_skips_comments():
    events = SSEParser().feed(b": keep-alive\nevent: x\ndata: a\ndata:b\nid: 7\n\ndata: c\n\n")
    assert events == [SSEEvent("x", "a\nb", "7"), SSEEvent(None, "c")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_parser_accepts_every_line_ending(newline):
    stream = newline.join([b"event: message_start", b'data: {"k": 1}', b"", b"data: x", b"", b""])
    events = SSEParser().feed(stream)
    assert [(e.event, e.data) for e in events] == [("message_start", '{"k": 1}'), (None, "x")]
    assert events[0].json() == {"k": 1}


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_parser_gives_the_same_events_whatever_the_chunking(newline):
    raw = newline.join([b"event: delta", "data: {\"t\": \"h\u00e9llo \u4e16\u754c \U0001F600\"}".encode(), b"",
                        b": comment", b"data: second", b"data: line", b"", b""])
    whole = SSEParser().feed(raw)
    for size in (1, 2, 3, 5, 7):
        parser = SSEParser()
        got = []
        for i in range(0, len(raw), size):
            got += parser.feed(raw[i:i + size])  # splits mid-UTF-8 and between CR and LF
        assert got == whole
    assert whole[0].json() == {"t": "h\u00e9llo \u4e16\u754c \U0001F600"}
    assert whole[1].data == "second\nline"


def test_parser_holds_an_unfinished_event_until_its_blank_line():
    parser = SSEParser()
    assert parser.feed(b"data: partial\n") == []
    assert parser.feed(b"\n") == [SSEEvent(None, "partial")]


def test_event_without_data_is_not_dispatched():
    assert SSEParser().feed(b"event: lonely\n\ndata: x\n\n") == [SSEEvent(None, "x")]


def test_leading_bom_is_ignored():
    assert SSEParser().feed("\ufeffdata: x\n\n".encode()) == [SSEEvent(None, "x")]


def test_aiter_events_yields_events_across_chunks():
    async def chunks():
        for part in (b"data: {\"a\"", b":1}\n", b"\nda", b"ta: 2\n\n"):
            yield part

    async def collect():
        return [e async for e in aiter_events(chunks())]

    assert [e.data for e in asyncio.run(collect())] == ['{"a":1}', "2"]
