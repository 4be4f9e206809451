"""What the API server's answers mean, in the drainer's own errors (drainer/errors.py).

A failure is judged by the whole answer, as the API server means it: the HTTP
status, the Status reason and details.causes (a 403 whose cause is
NamespaceTerminating is not an RBAC denial), and the body of a 2xx too (a Status
whose status is Failure is not a success, whatever the HTTP status; the eviction
handler returns, rather than raises, the Failure for a pod under two budgets). The
message's text is read only where Kubernetes says nothing else (a pod under several
budgets; an authorizer's denial and admission's share the reason Forbidden;
admission's refusal keeps the code its policy or webhook chose; a budget's and a
namespace's names are only in a cause's message). tests/e2e/test_status_texts.py
pins each of these texts to the real API server's answer, and kubesim's to it.
A failure on the wire (no connection, TLS, a deadline) is translated here too, by
its exception's type, and what a 401 means for a kubeconfig's user.
"""

from __future__ import annotations

import http.client
import logging
import math
import re
import ssl
from collections.abc import Mapping
from typing import Any

from drainer import jsonio
from drainer.errors import (
    AdmissionDenied,
    EvictionBlocked,
    FatalKubeError,
    KubeConflict,
    KubeError,
    KubeForbidden,
    KubeGone,
    KubeNotFound,
    KubeServerError,
    KubeTimedOut,
    KubeTooManyRequests,
    KubeUnauthorized,
    MultipleBudgets,
    NamespaceTerminating,
    TlsVerificationError,
)
from drainer.k8s.deadline import AnswerTooLarge, DeadlineExceeded
from drainer.k8s.transport import ERRORS, BadHeader, Unreachable

log = logging.getLogger(__name__)

Obj = dict[str, Any]

# The names only a cause's message carries: policy/v1 eviction's DisruptionBudget
# cause ("The disruption budget <name> needs 1 healthy pods and has 1 currently", or
# "... is still being processed by the server."), and the NamespaceLifecycle
# plugin's NamespaceTerminating cause ("namespace <name> is being terminated").
_BUDGET_NAME = re.compile(r"^The disruption budget (\S+) ")
_TERMINATING_NAMESPACE = re.compile(r"^namespace (\S+) is being terminated")
# A pod under several budgets: the eviction handler's Failure Status, code 500, no
# reason, no details; its message is the only sign.
_SEVERAL_BUDGETS = "more than one PodDisruptionBudget"
# Status cause types (k8s.io/api core/v1 NamespaceTerminatingCause, policy/v1
# DisruptionBudgetCause). A cause's type is the JSON key "reason".
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
_MAX_BODY_IN_MESSAGE = 300
# The authorization filter's refusal, whatever the authorizer (RBAC, Node, Webhook):
# responsewriters.forbiddenMessage, 'User "<name>" cannot <verb> resource "<r>" ...'
# (or 'path "<p>"' for a non-resource URL). Anything else in a 403 is admission's.
# The user name is Go-quoted (%q): a quote inside it is escaped.
_AUTHORIZER_DENIAL = re.compile(r'(?:^|: )User "(?:[^"\\]|\\.)*" cannot \S+ (?:resource|path) "')
# Reads never pass through admission: a 403 on one is never admission's.
_READS = frozenset({"get", "list", "watch"})
# How admission names itself when it refuses: a ValidatingAdmissionPolicy
# ("ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ...") or a webhook
# ('admission webhook "w" denied the request: ...').
_ADMISSION_DENIAL = re.compile(
    r"ValidatingAdmissionPolicy '[^']*' with binding|admission webhook \"[^\"]*\" denied"
)


def status_body(data: bytes) -> Obj:
    try:
        body = jsonio.loads(data)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


MAX_RETRY_AFTER = 600.0
"""The longest Retry-After taken as said: a larger one (a proxy's, a forged one) is
cut to this, so no wait overflows (threading.Event.wait raises OverflowError on
inf or 1e11) and no loop sleeps for hours on one answer."""


def _seconds(value: Any) -> float | None:
    """A Retry-After's seconds: a finite positive number, at most MAX_RETRY_AFTER;
    None for anything else (nan, inf, zero, negative, not a number)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        seconds = float(value)
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(seconds) or seconds <= 0:
        return None
    return min(seconds, MAX_RETRY_AFTER)


def retry_after(headers: Mapping[str, str], body: Obj) -> float | None:
    """Seconds the server asked the client to wait: the Retry-After header (as the
    apiserver and its priority-and-fairness filter send it), else the Status's
    details.retryAfterSeconds; capped at MAX_RETRY_AFTER."""
    seconds = _seconds(headers.get("Retry-After") or None)
    if seconds is not None:
        return seconds
    detail = (body.get("details") or {}).get("retryAfterSeconds")
    return None if isinstance(detail, str) else _seconds(detail)


def _causes(body: Obj, cause_type: str) -> list[Obj]:
    causes = (body.get("details") or {}).get("causes") or []
    return [
        c for c in causes if isinstance(c, dict) and cause_type in (c.get("reason"), c.get("type"))
    ]


def translate(
    status: int,
    data: bytes,
    headers: Mapping[str, str],
    *,
    verb: str,
    resource: str,
    what: str,
) -> KubeError:
    """The drainer error for an HTTP error answer of the API server."""
    body = status_body(data)
    raw = data[:_MAX_BODY_IN_MESSAGE].decode(errors="replace")
    return translate_status(
        status, body, headers, verb=verb, resource=resource, what=what, fallback=raw
    )


def translate_status(
    status: int,
    body: Obj,
    headers: Mapping[str, str],
    *,
    verb: str,
    resource: str,
    what: str,
    fallback: str = "",
) -> KubeError:
    """The same, from a Status object already parsed (a watch's ERROR event)."""
    message = str(body.get("message") or fallback)
    reason = str(body.get("reason") or "")
    if _ADMISSION_DENIAL.search(message):
        # A webhook chooses its own code (403 by default in controller-runtime, but
        # 404 or 409 too); whatever the code, admission refused this one object.
        return AdmissionDenied(what, message, status, reason)
    if status == 404:
        return KubeNotFound(f"{what}: not found ({message})", 404, reason)
    if status == 409:
        return KubeConflict(f"{what}: conflict ({message})", 409, reason)
    if status == 410:
        return KubeGone(f"{what}: {message}", 410, reason)
    if status == 401:
        return KubeUnauthorized(
            f"{what}: the API server refused the token (401 Unauthorized). Check that the "
            "function's IAM role has an EKS access entry (or aws-auth mapping) for this cluster.",
            401,
            reason,
        )
    if status == 403:
        return _forbidden(body, message, verb=verb, resource=resource, what=what)
    if status == 429:
        return _too_many_requests(body, message, headers, what=what)
    if 300 <= status < 400:
        return _redirect(status, headers, what=what)
    if status == 500 and _SEVERAL_BUDGETS in message:
        return MultipleBudgets(f"{what}: {message}", 500, reason)
    if status >= 500:
        return KubeServerError(f"{what}: API server error {status}: {message}", status, reason)
    return KubeError(f"{what}: HTTP {status} {reason}: {message}", status, reason)


def _redirect(status: int, headers: Mapping[str, str], *, what: str) -> KubeError:
    """A 3xx: the API server never redirects an API call (client-go takes any
    non-2xx for an error); a proxy, gateway or SSO front sent its own answer, often
    a login page's Location. A plain KubeError: not retried by the client (it is no
    outage, the same request meets the same redirect). Where it lands decides what
    follows: an eviction or a watch is tried again with the engine's backoff; the
    node's lookup or its cordon ends the drain failed, naming it."""
    location = headers.get("Location") or ""
    to = f" to {location[:200]}" if location else ""
    return KubeError(
        f"{what}: the server answered a redirect (HTTP {status}{to}), which the API server "
        "never sends: is a proxy or gateway in front of the API server (check the cluster "
        "endpoint, HTTPS_PROXY and NO_PROXY)?",
        status,
    )


def _forbidden(body: Obj, message: str, *, verb: str, resource: str, what: str) -> KubeError:
    """A 403, judged by its causes and details, never by its code alone."""
    terminating = _causes(body, NAMESPACE_TERMINATING_CAUSE)
    if terminating:
        # The namespace lifecycle admission refuses new objects (evictions too) in
        # a namespace being deleted; the pod goes with its namespace.
        cause = str(terminating[0].get("message") or "")
        match = _TERMINATING_NAMESPACE.search(cause)
        return NamespaceTerminating(
            f"{what}: {message} ({cause or 'namespace being terminated'})",
            namespace=match.group(1) if match else "",
        )
    details = body.get("details") or {}
    if details.get("group") == "policy" and details.get("kind") == "poddisruptionbudget":
        # eviction.go's checkAndDecrement: a budget whose status allows a negative
        # number of disruptions, or has too many evictions not yet confirmed by the
        # disruption controller. The budget refuses for now; it is not RBAC.
        return EvictionBlocked(
            f"{what}: PodDisruptionBudget {details.get('name', '?')} refuses for now: {message}",
            budget=str(details.get("name") or ""),
        )
    if _AUTHORIZER_DENIAL.search(message):
        return KubeForbidden(
            f"{what}: RBAC denied '{verb}' on '{resource}': {message}. Grant it to the group "
            f"eks-node-drainer (kubectl apply -f k8s-rbac/).",
            verb=verb,
            resource=resource,
        )
    if body.get("kind") == "Status" and verb not in _READS:
        # The API server's own Status, not in the authorizer's words: an admission
        # plugin refused this object (apierrors.NewForbidden, '<kind> "<name>" is
        # forbidden: <why>'), as a policy engine's webhook or a built-in plugin does.
        return AdmissionDenied(what, message, 403, "Forbidden")
    return KubeForbidden(
        f"{what}: 403 Forbidden, in neither the authorizer's nor admission's words "
        f"({message or 'no reason given'}): is a proxy or firewall in front of the API "
        f"server refusing '{verb}' on '{resource}'? If not, check the group eks-node-drainer "
        "has k8s-rbac/'s permissions.",
        verb=verb,
        resource=resource,
    )


def _too_many_requests(
    body: Obj, message: str, headers: Mapping[str, str], *, what: str
) -> KubeError:
    """A 429: a budget's refusal (DisruptionBudget cause) or API throttling."""
    budget_causes = _causes(body, DISRUPTION_BUDGET_CAUSE)
    if budget_causes:
        cause = str(budget_causes[0].get("message") or "")
        match = _BUDGET_NAME.search(cause)
        return EvictionBlocked(
            f"{what}: {message} {cause}".strip(),
            budget=match.group(1) if match else "",
            retry_after=retry_after(headers, body),
        )
    return KubeTooManyRequests(
        f"{what}: API server throttled the request: {message}", retry_after(headers, body)
    )


def answer(raw: Any, *, verb: str, resource: str, what: str) -> Any:
    """A 2xx answer's JSON; a Failure Status inside it (read every body) is raised."""
    try:
        data = raw.read()
    except ERRORS as e:
        raise transport_error(e, what) from e
    finally:
        raw.release_conn()
    if not data:
        return {}
    try:
        answer = jsonio.loads(data)
    except ValueError as e:
        raise KubeServerError(
            f"{what}: the API server answered with something that is not JSON"
        ) from e
    failure = failure_in_success(answer, raw.headers, verb=verb, resource=resource, what=what)
    if failure is not None:
        raise failure
    return answer


def failure_in_success(
    answer: Any,
    headers: Mapping[str, str],
    *,
    verb: str,
    resource: str,
    what: str,
) -> KubeError | None:
    """The drainer error a 2xx answer stands for, or None when it is a success.

    A 2xx is not always success: the eviction handler returns (not raises) a Status
    whose status is Failure and code 500 for a pod selected by more than one
    PodDisruptionBudget; v1.33.13 writes it as HTTP 500, but a server that writes it
    as the create's 201 must not pass for a success. Such a body is translated by its
    code exactly like the equivalent error answer."""
    if not isinstance(answer, dict):
        return None
    if answer.get("kind") != "Status" or answer.get("status") != "Failure":
        return None
    code = answer.get("code")
    return translate_status(
        code if isinstance(code, int) and not isinstance(code, bool) and code >= 400 else 500,
        answer,
        headers,
        verb=verb,
        resource=resource,
        what=what,
    )


def transport_error(error: Exception, what: str) -> KubeError:
    if isinstance(error, DeadlineExceeded):
        return KubeTimedOut(f"{what}: {error}")
    if isinstance(error, AnswerTooLarge):
        return KubeServerError(f"{what}: {error}")
    if isinstance(error, BadHeader):  # the same request would meet it again
        return FatalKubeError(
            f"{what}: {error}: check the kubeconfig's credentials (a token ending in a "
            "newline) and the --as/--as-group names"
        )
    text = str(error)
    if _certificate_refused(error):
        return TlsVerificationError(
            f"{what}: the API server's certificate does not verify against the cluster CA "
            f"({text[:200]}). Refusing to connect; check the cluster's certificateAuthority.",
        )
    return KubeServerError(f"{what}: cannot reach the API server: {cause(error)}")


def _certificate_refused(error: BaseException | None) -> bool:
    """The server's certificate did not verify (wrong CA, wrong name), wherever the
    ssl module's error sits: the error itself, inside Unreachable, or its cause."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, ssl.SSLCertVerificationError):
            return True
        inner = error.error if isinstance(error, Unreachable) else None
        error = inner or error.__cause__ or error.__context__
        seen += 1
    return False


def cause(error: Exception) -> str:
    """What went wrong on the wire, in a few words ("Connection refused (host:port)")."""
    if isinstance(error, Unreachable):
        return f"{error.error.strerror or cause(error.error)} ({error.where})"
    if isinstance(error, TimeoutError) or "timed out" in str(error).lower():
        return "timed out"
    text = str(error)
    found = re.search(r"\[Errno -?\d+\] (.+)", text)
    if found:
        return found.group(1).strip()
    return text.splitlines()[0][:160] if text else type(error).__name__


def server_gone(error: BaseException | None) -> bool:
    """The connection was refused or cut: no API server process answering there (a
    restart), as opposed to a slow answer or a watch this client ended itself."""
    if isinstance(error, Unreachable):
        return not isinstance(error.error, TimeoutError)
    return isinstance(error, (ConnectionError, http.client.HTTPException))
