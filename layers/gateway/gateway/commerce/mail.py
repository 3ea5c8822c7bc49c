"""Mail to people (verification codes, password resets): Amazon SES deployed, an outbox under `make run`.

Deployed, a message goes through SES v2 `SendEmail` from the stack's sender address
(`GATEWAY_MAIL_FROM`, a verified SES identity). Under `make run` (`GATEWAY_MAIL_OUTBOX`, a folder
of the local state) each message is a JSON file there instead, which the operator reads with
`make admin ARGS="outbox"`: no SMTP server, nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from gateway.errors import Unavailable
from gateway.settings import get_settings


def configured() -> bool:
    settings = get_settings()
    return bool(settings.mail_outbox or settings.mail_from)


def send(to: str, subject: str, text: str) -> None:
    settings = get_settings()
    if settings.mail_outbox:
        folder = Path(settings.mail_outbox)
        folder.mkdir(parents=True, exist_ok=True)
        at = time.time()
        message = {"to": to, "from": settings.mail_from or "gateway@localhost", "subject": subject, "text": text,
                   "at": int(at)}
        name = folder / f"{int(at * 1000):015d}-{secrets.token_hex(4)}.json"
        name.write_text(json.dumps(message, ensure_ascii=False, indent=1))
        return
    if not settings.mail_from:
        raise Unavailable("this gateway sends no mail (no sender address is configured)", code="mail_not_configured")
    from gateway.store.aws import client

    client("sesv2").send_email(FromEmailAddress=settings.mail_from, Destination={"ToAddresses": [to]},
                               Content={"Simple": {"Subject": {"Data": subject, "Charset": "UTF-8"},
                                                   "Body": {"Text": {"Data": text, "Charset": "UTF-8"}}}})


def outbox(limit: int = 20, folder: str | None = None) -> list[dict[str, Any]]:
    """The newest messages of the local outbox (the admin command line's `outbox`)."""
    folder = folder or get_settings().mail_outbox
    if not folder or not os.path.isdir(folder):
        return []
    names = sorted(os.listdir(folder), reverse=True)[:limit]
    return [json.loads((Path(folder) / name).read_text()) for name in names if name.endswith(".json")]
