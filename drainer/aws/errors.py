"""What an AWS failure means, decided once: worth another try or not, and what to do.

Why a boundary: botocore raises one `ClientError` for everything, told apart only
by an error code string. The rest of the drainer should not know those strings, so
every call in drainer/aws catches them and raises a `drainer.errors` type whose
message says what to do (which IAM action to grant, which cluster and region were
searched). The original botocore error stays attached as `__cause__`.

It is also the one place that decides whether an error is worth another try: a
throttled, failing or unreachable service is (`is_transient`: the handler raises
and Lambda retries the event); an answer that the same call gets again, an unknown
group or hook, a malformed id, a denied permission, is not (`is_permanent`, raised
as PermanentAwsError: the drain fails with the message, and the event is not
retried).
"""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.parsers import ResponseParserError

from drainer.errors import AwsError, DrainerError, PermanentAwsError

_ACCESS_DENIED = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
)
_TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "RequestTimeout",
        "RequestTimeoutException",
        "ServerException",
        "ServiceException",
        "EC2ThrottledException",
        "ResourceContention",
    }
)
# Answers of 4xx that another try may not meet: credentials that expired (the
# runtime refreshes them) or a request signed with a clock that drifted.
_RETRY_MAY_FIX = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "IDPCommunicationError"}
)
AWS_FAILURES = (ClientError, BotoCoreError, ResponseParserError)
"""What a botocore call raises when AWS failed or refused: an answer with an error
code, no answer (connection, timeout), or an answer botocore could not read."""
ANSWERED_OR_UNREACHED = (ClientError, BotoCoreError)
"""AWS_FAILURES less an unreadable answer: what the calls of the hook sync, the
target groups and the notices caught when they lived in drainer/lifecycle. Kept so
that moving them here changed no behaviour: an unreadable answer to one of those is
raised as botocore raised it."""


def error_code(error: BaseException) -> str:
    """The AWS error code of a ClientError ("" for anything else)."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def error_message(error: BaseException) -> str:
    """AWS's own message of a ClientError (the text of anything else)."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Message", ""))
    return str(error)


def is_transient(error: BaseException) -> bool:
    """True for throttling, 5xx and connection failures: worth another try later.

    Looks through `__cause__`, so it works on the drainer errors raised here too.
    """
    cause = error.__cause__ if isinstance(error, DrainerError) else error
    if cause is None:
        return False
    if isinstance(cause, BotoCoreError | ResponseParserError):
        return True
    if isinstance(cause, ClientError):
        return error_code(cause) in _TRANSIENT_CODES or _status(cause) >= 500
    return False


def is_permanent(error: BaseException) -> bool:
    """True when the same call cannot succeed by being made again: an AWS answer
    below 500 that is neither throttling nor expired credentials (ValidationError for
    an unknown group or hook, InvalidInstanceID.Malformed, AccessDenied, ...), or a
    PermanentAwsError raised here without one (a hook the group does not have).

    Looks through `__cause__`, as `is_transient` does. An error that is neither
    (a bug, no cause at all) is not permanent: it is raised, as before.
    """
    if isinstance(error, PermanentAwsError):
        return True
    cause = error.__cause__ if isinstance(error, DrainerError) else error
    if not isinstance(cause, ClientError) or is_transient(cause):
        return False
    return error_code(cause) not in _RETRY_MAY_FIX and _status(cause) < 500


def _status(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def is_access_denied(error: BaseException) -> bool:
    """Whether AWS refused the call to the caller's identity (IAM, an SCP)."""
    return error_code(error) in _ACCESS_DENIED


def translate(error: Exception, action: str, what: str) -> AwsError:
    """An AwsError for a failed `action` (an IAM action name) that says what to do; a
    PermanentAwsError when `is_permanent` says retrying cannot help. `error` is one
    of AWS_FAILURES; raise the result `from error`."""
    kind = PermanentAwsError if is_permanent(error) else AwsError
    code = error_code(error)
    if code in _ACCESS_DENIED:
        return kind(f"{what}: access denied ({code}); grant {action} to the function's IAM role")
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return kind(
            f"{what}: no AWS credentials found: set AWS_PROFILE (after `aws configure` or "
            "`aws sso login`) or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where "
            "an IAM role is attached"
        )
    if isinstance(error, BotoCoreError):
        return kind(
            f"{what}: {type(error).__name__}: {error} (after botocore's retries; "
            "check the network path to the AWS endpoint)"
        )
    if isinstance(error, ResponseParserError):
        first_line = str(error).splitlines()[0] if str(error) else ""
        return kind(f"{what}: AWS's answer could not be read: {first_line}")
    return kind(f"{what}: {code}: {error_message(error)}")
