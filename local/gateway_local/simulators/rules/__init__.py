"""What each simulated upstream refuses, written from that upstream's public API reference, not
from the gateway's own request models (`gateway.schemas`): a fake that shares the gateway's rules
would accept whatever the gateway wrongly sends.

One module per wire protocol (`chat`, `messages`, `content`, `bedrock`), each with `refusal(path, body)`:
the upstream's own 400 message and the field it names, or None. A simulator calls it from its
entry point in one line, before it reads the request for its answer.
"""

from . import bedrock, chat, content, messages

__all__ = ["bedrock", "chat", "content", "messages"]
