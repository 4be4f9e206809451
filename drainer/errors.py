"""The drainer's own error types.

Every error that leaves a boundary module (settings, events, aws, auth, kube) is
one of these, so the handler can map outcomes in one table without knowing which
library failed. Messages say what to do, not only what went wrong.
"""

from __future__ import annotations


class DrainerError(Exception):
    """Base class of every error the drainer raises on purpose."""


class SettingsError(DrainerError):
    """An environment variable holds a value the drainer cannot use."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"{variable}: {message}")
        self.variable = variable


class AwsError(DrainerError):
    """An AWS call failed in a way retries did not fix."""


class AwsConfigError(DrainerError):
    """This machine's AWS configuration cannot be used: a profile that does not exist,
    a config file that does not parse. The CLI exits 3, as for AWS's other access
    problems (drainer/cli/main.py AWS_PROBLEMS)."""


class PermanentAwsError(AwsError):
    """An AWS call refused in a way the same call meets again: an unknown group or
    hook, a malformed id, a denied permission. Retrying the event cannot help, so the
    handler ends the drain as failed, naming the cause, instead of raising for Lambda
    to retry. drainer/aws/errors.py alone decides which errors are permanent."""


class InstanceNotFound(DrainerError):
    """EC2 does not know the instance (already gone, or the wrong account/region)."""


class ClusterNotFound(DrainerError):
    """EKS does not know the cluster, or no cluster could be determined."""


class LifecycleActionGone(DrainerError):
    """The lifecycle action is no longer active: someone else completed it, or it timed out."""


class RecordChanged(DrainerError):
    """The node's drain record changed between the look that decided to drain and the
    cordon: another invocation's drain (a delivery of the same event, a spot event's)
    or a release came first. Nothing was written; whoever decided looks again."""


class KubeError(DrainerError):
    """A Kubernetes API call failed; `status` is the HTTP status (0 when no response)."""

    def __init__(self, message: str, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.said = False
        """The client has already said this failure (one line per outage of the API
        server, drainer/k8s/outage.py): a caller that retries it says it at debug,
        not once per call and retry."""


class KubeNotFound(KubeError):
    """404: the object does not exist."""


class KubeConflict(KubeError):
    """409: a precondition (UID, resourceVersion) did not hold."""


class FatalKubeError(KubeError):
    """An error that retrying will not fix: the drain stops at once, its waiters and
    watches with it, and the summary names the cause. Catch this class, never a
    list of its subclasses, to decide "is this fatal?"."""


class KubeUnauthorized(FatalKubeError):
    """401: the bearer token was refused."""


class CredentialsUnavailable(FatalKubeError):
    """No credentials to send: the kubeconfig user's exec credential plugin failed or
    printed no token. No request can be authenticated until that is fixed."""


class KubeForbidden(FatalKubeError):
    """403: RBAC denied the call; the message names the verb and resource to grant."""

    def __init__(self, message: str, verb: str = "", resource: str = "") -> None:
        super().__init__(message, status=403, reason="Forbidden")
        self.verb = verb
        self.resource = resource


class AdmissionDenied(KubeError):
    """An admission policy or webhook refused the call: a 403 whose Status is not the
    authorizer's (RBAC's answer always says 'User "..." cannot <verb> resource ...'),
    or a 400/422 naming a ValidatingAdmissionPolicy or an admission webhook.

    Not an RBAC denial (so not fatal): the policy judges each object, and refusing
    one pod's eviction says nothing about the next. The drain retries the pod with
    backoff and names the policy's message (`refusal`) if it is still refused at the
    end."""

    def __init__(self, what: str, refusal: str, status: int, reason: str = "") -> None:
        super().__init__(f"{what}: refused by admission: {refusal}", status, reason)
        self.refusal = refusal


class NamespaceTerminating(KubeError):
    """403 with the cause NamespaceTerminating: the pod's namespace is being deleted.

    Not an RBAC denial (so not a KubeForbidden): the namespace's admission refuses
    every new object in it, evictions included, and the namespace controller deletes
    the pod anyway. The drain stops evicting the pod and waits for it to go."""

    def __init__(self, message: str, namespace: str = "") -> None:
        super().__init__(message, status=403, reason="Forbidden")
        self.namespace = namespace


class KubeTooManyRequests(KubeError):
    """429 not caused by a PodDisruptionBudget: API priority and fairness throttling."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message, status=429, reason="TooManyRequests")
        self.retry_after = retry_after


class EvictionBlocked(KubeError):
    """429 on an eviction: a PodDisruptionBudget does not allow the disruption now."""

    def __init__(self, message: str, budget: str = "", retry_after: float | None = None) -> None:
        super().__init__(message, status=429, reason="TooManyRequests")
        self.budget = budget
        self.retry_after = retry_after


class MultipleBudgets(KubeError):
    """More than one PodDisruptionBudget selects the pod, which the eviction API does
    not support: a Failure Status of code 500, as HTTP 500 (v1.33.13, measured) or in
    a 2xx. The server's message does not name the budgets."""


class KubeServerError(KubeError):
    """5xx or a broken connection: worth retrying with backoff."""


class CredentialsFailing(KubeServerError):
    """The kubeconfig user's exec credential plugin, which worked before, fails now
    and no token it gave is still valid: a passing trouble (a network blip on the way
    to STS or the identity provider) until it has failed for
    drainer.k8s.auth.CREDENTIALS_OUTAGE_SECONDS, when it becomes
    CredentialsUnavailable. Retried as a server error meanwhile."""


class KubeTimedOut(KubeServerError):
    """No whole answer within the request's deadline: not retried within the call
    (as kubectl's --request-timeout), which already took all its time; the caller
    decides, as after any server error."""


class TlsVerificationError(FatalKubeError):
    """The API server's certificate did not verify against the cluster CA."""


class KubeGone(KubeError):
    """410: the resourceVersion a watch or list continued from is too old; re-list."""
