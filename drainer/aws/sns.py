"""SNS: a message to a topic (the drain notices)."""

from __future__ import annotations

from collections.abc import Mapping

from drainer.aws.errors import ANSWERED_OR_UNREACHED, translate
from drainer.aws.session import Client

_SUBJECT_LIMIT = 99  # SNS subjects: under 100 printable ASCII characters, one line


def publish_to_topic(
    sns: Client, topic: str, subject: str, message: str, attributes: Mapping[str, str]
) -> None:
    """Publish `message` to `topic`, with `subject` made one that SNS accepts (other
    characters as "?", cut short) and `attributes` as string message attributes."""
    printable = "".join(c if " " <= c <= "~" else "?" for c in subject)[:_SUBJECT_LIMIT]
    try:
        sns.publish(
            TopicArn=topic,
            Subject=printable,
            Message=message,
            MessageAttributes={
                k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()
            },
        )
    except ANSWERED_OR_UNREACHED as e:
        raise translate(e, "sns:Publish", f"Publish to {topic}") from e
