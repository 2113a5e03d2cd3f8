"""A real SMTP server for the alerts' tests: aiosmtpd on 127.0.0.1, keeping every message it
receives, and the Airflow connection and notifier settings that send to it."""

from __future__ import annotations

import email
import json
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import Message

from testkit.paths import free_port

SMTP_NOTIFIER = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"


class _Mailbox:
    def __init__(self):
        self.messages: list[Message] = []

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd's handler hook
        self.messages.append(
            email.message_from_bytes(envelope.original_content or envelope.content)
        )
        return "250 OK"


@contextmanager
def smtp_server() -> Iterator[tuple[dict[str, str], list[Message]]]:
    """A running SMTP server: the environment that makes the lakehouse's alerts mail it (the
    ``smtp_default`` connection and ``LAKEHOUSE_NOTIFIERS`` naming the SMTP provider's notifier),
    and the list its messages arrive in. Stopped when the block ends."""
    from aiosmtpd.controller import Controller

    mailbox = _Mailbox()
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    env = {
        "AIRFLOW_CONN_SMTP_DEFAULT": json.dumps(
            {
                "conn_type": "smtp",
                "host": "127.0.0.1",
                "port": port,
                "extra": {"disable_ssl": True, "disable_tls": True},
            }
        ),
        "LAKEHOUSE_NOTIFIERS": json.dumps(
            [
                {
                    "class": SMTP_NOTIFIER,
                    "to": "data-team@example.com",
                    "from_email": "airflow@example.com",
                    "subject": "{subject}",
                    "html_content": "<pre>{message}</pre>",
                }
            ]
        ),
    }
    try:
        yield env, mailbox.messages
    finally:
        controller.stop()


def body(message: Message) -> str:
    """A message's text, its parts joined."""
    parts = message.walk() if message.is_multipart() else [message]
    return "".join(
        part.get_payload(decode=True).decode() for part in parts if not part.is_multipart()
    )
