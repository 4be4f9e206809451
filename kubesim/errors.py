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
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
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


def invalid(kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
    """422 Invalid with one cause per (field, message)."""
    summary = ", ".join(f"{field}: {message}" for field, message in causes)
    details = _kind_details(kind, name, group)
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": message, "field": field}
        for field, message in causes
    ]
    return ApiError(
        422, f'{kind} "{name}" is invalid: {summary}', reason="Invalid", details=details
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, reason="BadRequest")
