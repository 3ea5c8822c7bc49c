"""What a cut stream generated, on the best evidence the stream holds (`StreamConverter.output_tokens`)."""

from __future__ import annotations

from gateway.formats import StreamConverter
from gateway.tokens import estimate_tokens


def chat_chunk(text: str) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


def test_one_token_deltas_count_one_each_not_their_rounded_up_estimates():
    converter = StreamConverter("chat", "chat")
    pieces = ["You", " said", ":", " one", " two", " thre", "e"]
    for piece in pieces:
        converter.feed(None, chat_chunk(piece))
    # Each piece's own estimate rounds up (" said" is 2): their sum would be 1.5 times too many
    assert sum(estimate_tokens(p) for p in pieces) > len(pieces)
    assert converter.output_tokens == len(pieces)


def test_deltas_of_several_tokens_are_counted_by_their_whole_text():
    converter = StreamConverter("messages", "messages")
    converter.feed("message_start", {"type": "message_start", "message": {
        "id": "m", "model": "m", "usage": {"input_tokens": 9, "output_tokens": 1}}})
    text = "The quick brown fox jumps over the lazy dog, and then it naps."
    for part in (text[:30], text[30:]):
        converter.feed("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": part}})
    assert converter.output_tokens == estimate_tokens(text)  # not 2 (deltas), not 1 (message_start's count)


def test_an_upstream_count_mid_stream_is_taken_and_only_what_follows_it_estimated():
    converter = StreamConverter("content", "content")
    for n, piece in enumerate(["Hello", " there", " friend"], start=1):
        converter.feed(None, {"candidates": [{"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0}],
                              "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 10 * n}})
    assert converter.output_tokens == 30  # the upstream's own cumulative count
    converter.feed(None, {"candidates": [{"content": {"parts": [{"text": " again"}], "role": "model"},
                                          "index": 0}]})
    # then what came after it, without a count of its own: one delta, or its text's estimate
    assert converter.output_tokens == 30 + max(1, estimate_tokens(" again"))
