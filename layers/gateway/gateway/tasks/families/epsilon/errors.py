"""Epsilon's (the OpenAI videos API's) errors: OpenAI's own table (`upstreams/chat.py`), since
the videos endpoints answer in the same envelope with the same codes (`insufficient_quota`...)."""

from __future__ import annotations

from gateway.upstreams.chat import ERRORS as OPENAI_ERRORS
from gateway.upstreams.errors import ErrorTable

ERRORS = ErrorTable("epsilon", OPENAI_ERRORS.rules, codes=OPENAI_ERRORS.codes)
