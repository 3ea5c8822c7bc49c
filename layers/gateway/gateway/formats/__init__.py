"""Conversions between the chat, messages, content-generation and responses dialects."""

from .usage import (
    Usage, usage_from_chat, usage_from_content, usage_from_messages, usage_from_responses,
    usage_to_chat, usage_to_content, usage_to_messages, usage_to_responses,
)
