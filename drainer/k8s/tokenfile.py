"""A kubeconfig user with both a `tokenFile` and an inline `token`, under
drainer.k8s.kubeconfig, sent as client-go sends them
(NewBearerAuthWithRefreshRoundTripper): the file's token whenever the file can be
read, read again as it rotates (drainer.k8s.auth.FileToken); the inline token, often
a snapshot of an earlier one, only while the file has never been read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from drainer.errors import CredentialsUnavailable
from drainer.k8s.auth import FileToken

log = logging.getLogger(__name__)


class FileOrInlineToken(FileToken):
    """A FileToken that falls back to the user's inline token, said once, where a
    FileToken alone would be CredentialsUnavailable."""

    def __init__(self, path: str, *, inline: str, clock: Callable[[], float]) -> None:
        super().__init__(path, clock=clock)
        self.inline = inline
        self._said = False

    def token(self) -> str:
        try:
            return super().token()
        except CredentialsUnavailable as e:
            if not self._said:
                self._said = True
                log.warning("%s; sending the kubeconfig user's inline token instead", e)
            return self.inline

    def __repr__(self) -> str:  # never the token
        return f"FileOrInlineToken(path={self.path!r})"
