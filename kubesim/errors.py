"""API errors as the real server reports them: an HTTP status and a v1 Status body."""

from __future__ import annotations

from typing import Any

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        list_meta: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        # "" is the real StatusReasonUnknown: the field is left out of the body.
        self.reason = reason if reason is not None else _REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}
        self.list_meta = list_meta

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta or {}),
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        return body


def _kind_details(kind: str, name: str, group: str = "") -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        404, f'{qualified} "{name}" not found', details=_kind_details(plural, name, group)
    )


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        f'{qualified} "{name}" already exists',
        reason="AlreadyExists",
        details=_kind_details(plural, name, group),
    )


def conflict(plural: str, name: str, why: str, group: str = "") -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        reason="Conflict",
        details=_kind_details(plural, name, group),
    )


def invalid(
    kind: str, name: str, causes: list[tuple[str, str]], group: str = "", cause: str = ""
) -> ApiError:
    """422 Invalid with one cause per (field, message), as apierrors.NewInvalid builds it:
    the summary is one field error, or several in brackets. The cause type is taken from
    the message's prefix ("Forbidden: ..." -> FieldValueForbidden) unless `cause` says."""
    messages = [f"{field}: {message}" for field, message in causes]
    summary = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    details = _kind_details(kind, name, group)
    details["causes"] = [
        {"reason": cause or _cause_type(message), "message": message, "field": field}
        for field, message in causes
    ]
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        422, f'{qualified} "{name}" is invalid: {summary}', reason="Invalid", details=details
    )


_CAUSE_TYPES = {
    "Required value": "FieldValueRequired",
    "Forbidden": "FieldValueForbidden",
    "Unsupported value": "FieldValueNotSupported",
    "Duplicate value": "FieldValueDuplicate",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Not found": "FieldValueNotFound",
    "Internal error": "InternalError",
}


def _cause_type(message: str) -> str:
    for prefix, cause in _CAUSE_TYPES.items():
        if message.startswith(prefix):
            return cause
    return "FieldValueInvalid"


def forbidden(plural: str, name: str, why: str, group: str = "") -> ApiError:
    """403 as apierrors.NewForbidden builds it (admission plugins and registries)."""
    qualified = f"{plural}.{group}" if group else plural
    subject = f'{qualified} "{name}"' if name else qualified
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = plural
    return ApiError(403, f"{subject} is forbidden: {why}", reason="Forbidden", details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, reason="BadRequest")
