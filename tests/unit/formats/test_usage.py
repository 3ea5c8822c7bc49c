"""Usage: every dialect's counts read into one record and written back."""

from gateway.formats import (
    Usage,
    usage_from_chat,
    usage_from_content,
    usage_from_messages,
    usage_from_responses,
    usage_of_response,
    usage_to_chat,
    usage_to_content,
    usage_to_messages,
    usage_to_responses,
)


def test_chat_usage_counts_cached_and_reasoning_inside_the_totals():
    # Given a chat usage block with cached prompt tokens and reasoning tokens
    usage = {"prompt_tokens": 1200, "completion_tokens": 340, "total_tokens": 1540,
             "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": 256}}
    # When it is read
    read = usage_from_chat(usage)
    # Then the totals are kept and the shares are exposed
    assert read == Usage(1200, 340, cached_input_tokens=1024, reasoning_tokens=256)
    assert usage_to_chat(read) == {
        "prompt_tokens": 1200, "completion_tokens": 340, "total_tokens": 1540,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "completion_tokens_details": {"reasoning_tokens": 256}}


def test_messages_input_tokens_exclude_cache_reads_and_writes():
    # Given a messages usage block: 100 fresh input tokens, 900 read from cache, 50 written to it
    usage = {"input_tokens": 100, "output_tokens": 42, "cache_read_input_tokens": 900,
             "cache_creation_input_tokens": 50}
    # When it is read
    read = usage_from_messages(usage)
    # Then the whole prompt is 1050 tokens, with the two cache shares apart
    assert read == Usage(1050, 42, cached_input_tokens=900, cache_creation_input_tokens=50)
    # And written back it gives the dialect's own arithmetic
    assert usage_to_messages(read) == usage


def test_messages_cache_writes_kept_for_an_hour_are_read_apart_and_written_back():
    # Given 50 tokens written to the cache, 20 of them for an hour (the 1-hour write is dearer)
    usage = {"input_tokens": 100, "output_tokens": 42, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 50,
             "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 20}}
    read = usage_from_messages(usage)
    assert read == Usage(150, 42, cache_creation_input_tokens=50, cache_creation_1h_input_tokens=20)
    assert usage_to_messages(read) == usage
    # A split that claims more hour-long writes than writes counts no more than were written
    assert usage_from_messages({**usage, "cache_creation": {"ephemeral_1h_input_tokens": 99}}) \
        .cache_creation_1h_input_tokens == 50
    assert usage_from_messages({**usage, "cache_creation": "bogus"}).cache_creation_1h_input_tokens == 0


def test_messages_input_tokens_never_go_below_zero_when_the_cache_counts_exceed_the_prompt():
    assert usage_to_messages(Usage(10, 1, cached_input_tokens=8, cache_creation_input_tokens=5))["input_tokens"] == 0


def test_content_candidates_never_count_below_zero_when_all_output_was_thought():
    rendered = usage_to_content(Usage(10, 5, reasoning_tokens=5))
    assert (rendered["candidatesTokenCount"], rendered["thoughtsTokenCount"]) == (0, 5)


def test_content_thoughts_count_as_output_because_they_are_billed_as_output():
    # Given content usage metadata with cached prompt tokens and thoughts
    metadata = {"promptTokenCount": 1000, "cachedContentTokenCount": 200, "candidatesTokenCount": 50,
                "thoughtsTokenCount": 300, "totalTokenCount": 1350}
    # When it is read
    read = usage_from_content(metadata)
    # Then thoughts are output (and reasoning), the cached share stays inside the prompt count
    assert read == Usage(1000, 350, cached_input_tokens=200, reasoning_tokens=300)
    assert usage_to_content(read) == metadata


def test_content_tool_use_prompt_tokens_are_input():
    read = usage_from_content({"promptTokenCount": 10, "toolUsePromptTokenCount": 5,
                               "candidatesTokenCount": 3, "totalTokenCount": 18})
    assert (read.input_tokens, read.output_tokens) == (15, 3)


def test_responses_usage_reads_details():
    usage = {"input_tokens": 80, "input_tokens_details": {"cached_tokens": 64, "cache_write_tokens": 0},
             "output_tokens": 20,
             "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 100}
    read = usage_from_responses(usage)
    assert read == Usage(80, 20, cached_input_tokens=64, reasoning_tokens=12)
    assert usage_to_responses(read) == usage


def test_missing_or_null_usage_reads_as_zero():
    for reader in (usage_from_chat, usage_from_messages, usage_from_content, usage_from_responses):
        assert reader(None) == Usage(0, 0)
        assert reader({}) == Usage(0, 0)


def test_usage_moves_between_dialects_without_losing_the_cache_share():
    # Given content usage with a cached share, rendered for a messages client
    read = usage_from_content({"promptTokenCount": 1000, "cachedContentTokenCount": 600,
                               "candidatesTokenCount": 20, "totalTokenCount": 1020})
    # Then the messages input_tokens leave the cached reads out, as that dialect does
    assert usage_to_messages(read) == {"input_tokens": 400, "output_tokens": 20,
                                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 600}


def test_usage_of_a_whole_answer_in_each_dialect():
    assert usage_of_response({"usage": {"prompt_tokens": 3, "completion_tokens": 4}}, "chat") == Usage(3, 4)
    assert usage_of_response({"usage": {"input_tokens": 3, "output_tokens": 4}}, "messages") == Usage(3, 4)
    assert usage_of_response({"usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4}},
                             "content") == Usage(3, 4)
    assert usage_of_response({"usage": {"input_tokens": 3, "output_tokens": 4}}, "responses") == Usage(3, 4)


def test_cache_writes_reported_by_chat_style_usage_are_kept():
    usage = {"prompt_tokens": 500, "completion_tokens": 5,
             "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 300}}
    read = usage_from_chat(usage)
    assert read == Usage(500, 5, cached_input_tokens=100, cache_creation_input_tokens=300)
    assert usage_to_chat(read)["prompt_tokens_details"] == {"cached_tokens": 100, "cache_write_tokens": 300}
    assert usage_to_messages(read)["input_tokens"] == 100
    assert usage_from_responses(usage_to_responses(read)) == read
