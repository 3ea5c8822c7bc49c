"""Conversions between the chat, messages, content-generation and responses dialects."""
