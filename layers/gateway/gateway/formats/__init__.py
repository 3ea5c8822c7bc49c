"""Conversions between the chat, messages, content-generation and responses dialects."""

from .chat import DONE
from .convert import CUT_MESSAGE, StreamConverter, convert_request, convert_response, usage_of_response
from .neutral import CHAT, CONTENT, DIALECTS, MESSAGES, RESPONSES
from .usage import (
    Usage,
    usage_from_chat,
    usage_from_content,
    usage_from_messages,
    usage_from_responses,
    usage_to_chat,
    usage_to_content,
    usage_to_messages,
    usage_to_responses,
)

__all__ = [
    "CHAT", "CONTENT", "CUT_MESSAGE", "DIALECTS", "DONE", "MESSAGES", "RESPONSES", "StreamConverter",
    "Usage", "convert_request", "convert_response", "usage_from_chat", "usage_from_content",
    "usage_from_messages", "usage_from_responses", "usage_of_response", "usage_to_chat",
    "usage_to_content", "usage_to_messages", "usage_to_responses",
]
