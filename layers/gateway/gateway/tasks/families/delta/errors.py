"""Delta's (Veo's) errors as Google means them: the same rules as the content protocol's
(`upstreams/content.py` `GOOGLE_RULES`), since the Gemini API and Vertex AI answer every method
alike: a revoked key is a **400** INVALID_ARGUMENT with the ErrorInfo reason `API_KEY_INVALID`,
the channel's fault, not the client's."""

from __future__ import annotations

from gateway.upstreams.content import GOOGLE_RULES
from gateway.upstreams.errors import ErrorTable, google_codes, google_message

ERRORS = ErrorTable("delta", GOOGLE_RULES, codes=google_codes, message=google_message)
