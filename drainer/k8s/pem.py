"""The PEM blocks of a kubeconfig's certificate and key data, under
drainer.k8s.kubeconfig, read as client-go reads them (Go's pem.Decode): the
`-----BEGIN ...-----` to `-----END ...-----` blocks alone, whatever lies around them
skipped, such as a CA bundle's comment lines (curl's cacert.pem names its issuers in
UTF-8; other bundles are in Latin-1). What the ssl module is then given is ASCII,
which its cadata requires.
"""

from __future__ import annotations

import base64
import re
from typing import Any

_BLOCK = re.compile(rb"-----BEGIN ([\x20-\x2c\x2e-\x7e]+)-----\r?\n[\x00-\x7f]*?-----END \1-----")
"""A block: its BEGIN and END lines naming the same type, ASCII between them."""
_KINDS = {"certificate-authority-data": frozenset({"CERTIFICATE"})}
"""The blocks kept of a CA (Go's AppendCertsFromPEM keeps certificates); of a client
certificate and its key, all of them (a key's block is `... PRIVATE KEY` of any kind)."""


def decoded(data: Any, field: str) -> str:
    """The PEM blocks of a kubeconfig's `field` (certificate-authority-data,
    client-certificate-data, client-key-data): its base64 decoded to bytes, and only
    the blocks kept. "" for no data; ValueError, naming the field, for data that is
    not base64 or holds no block."""
    if not data:
        return ""
    try:
        raw = base64.b64decode(str(data), validate=False)
    except ValueError as e:
        raise ValueError(f"{field} is not base64 ({e})") from e
    text = blocks(raw, _KINDS.get(field))
    if not text:
        kind = "CERTIFICATE" if "certificate" in field else "... PRIVATE KEY"
        raise ValueError(
            f"{field} holds no PEM block (-----BEGIN {kind}-----); it must be the "
            "base64 of a PEM file (`base64 -w0 FILE`)"
        )
    return text


def blocks(data: bytes, kinds: frozenset[str] | None = None) -> str:
    """The PEM blocks in `data` (of the `kinds` given, as "CERTIFICATE"; of any kind by
    default), one after another; "" when there is none."""
    found = [
        match.group(0).decode("ascii").replace("\r\n", "\n")
        for match in _BLOCK.finditer(data)
        if kinds is None or match.group(1).decode("ascii") in kinds
    ]
    return "".join(f"{block}\n" for block in found)
