"""Impersonation as kubectl does it: the kubeconfig user's `as`, `as-uid`,
`as-groups` and `as-user-extra`, overridden by the `--as`, `--as-uid` and
`--as-group` flags, sent as Impersonate-User, Impersonate-Uid, Impersonate-Group
(once per group) and Impersonate-Extra-<key> (once per value) headers. The API
server then authorizes every request as that user, once it has allowed the
kubeconfig's own identity to impersonate (RBAC: the `impersonate` verb).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

HeaderPairs = tuple[tuple[str, str], ...]
_TOKEN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$&'*+-.^_`|~")
"""The characters of an HTTP header name (RFC 7230's tchar) but "%", which escapes."""


class ImpersonationError(ValueError):
    """Impersonation that kubectl refuses, in a few words."""


@dataclass(frozen=True)
class Impersonation:
    """Who to act as; empty: the kubeconfig's own identity."""

    user: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def of_user(cls, user: Mapping[str, Any]) -> Impersonation:
        """What a kubeconfig user's fields ask for; ImpersonationError for a field
        that is not of its kind, as kubectl refuses the file (a string where a list
        belongs would otherwise be one group per letter)."""
        extra = user.get("as-user-extra") or {}
        if not isinstance(extra, Mapping):
            raise ImpersonationError("as-user-extra is not a mapping of lists")
        return cls(
            user=str(user.get("as") or ""),
            uid=str(user.get("as-uid") or ""),
            groups=_strings(user.get("as-groups") or (), "as-groups"),
            extra=tuple((str(k), _strings(v, "as-user-extra")) for k, v in extra.items()),
        )

    def overridden_by(self, flags: Impersonation | None) -> Impersonation:
        """kubectl's flags over the kubeconfig's fields, each where it is given."""
        if flags is None:
            return self
        return Impersonation(
            user=flags.user or self.user,
            uid=flags.uid or self.uid,
            groups=flags.groups or self.groups,
            extra=flags.extra or self.extra,
        )

    def headers(self) -> HeaderPairs:
        """The request headers; ImpersonationError for groups, a uid or extras
        without a user, which kubectl refuses too."""
        if not self.user:
            if self.uid or self.groups or self.extra:
                raise ImpersonationError(
                    "impersonation: a uid, groups or user-extra without a user to "
                    "impersonate (--as, or the kubeconfig user's `as`)"
                )
            return ()
        pairs = [("Impersonate-User", self.user)]
        if self.uid:
            pairs.append(("Impersonate-Uid", self.uid))
        pairs += [("Impersonate-Group", group) for group in self.groups]
        for key, values in self.extra:
            pairs += [(f"Impersonate-Extra-{_escaped(key)}", value) for value in values]
        return tuple(pairs)


class Headers(dict[str, str]):
    """A request's headers and some that repeat (Impersonate-Group, once per group):
    http.client sends what `items()` gives, where a dict would keep one of each."""

    def __init__(self, single: Mapping[str, str], repeated: HeaderPairs) -> None:
        super().__init__(single)
        self.repeated = repeated

    def items(self) -> list[tuple[str, str]]:  # type: ignore[override]
        return [*super().items(), *self.repeated]


def _strings(value: Any, field: str) -> tuple[str, ...]:
    """A list of strings (as-groups, or one of as-user-extra's values)."""
    if isinstance(value, str | Mapping) or not isinstance(value, Iterable):
        kind, example = ("a list", "[system:masters]")
        if field != "as-groups":
            kind, example = ("a mapping of lists", "{scopes: [view]}")
        raise ImpersonationError(
            f"the kubeconfig user's {field} is not {kind} ({type(value).__name__} "
            f"{value!r:.40}): write it as `{field}: {example}`"
        )
    return tuple(str(v) for v in value)


def _escaped(key: str) -> str:
    """An extra's key in a header name, as client-go writes it: each byte that may
    not be in a header name (and "%") percent-encoded."""
    return "".join(chr(byte) if chr(byte) in _TOKEN else f"%{byte:02X}" for byte in key.encode())
