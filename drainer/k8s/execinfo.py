"""What an exec credential plugin is given, as client-go gives it: its command
(a relative path taken from the file that defined the user, a bare name looked up on
PATH), its environment, whether it may talk to the person at the terminal
(interactiveMode), and the cluster it signs in to (provideClusterInfo).

kubeconfig.Plugin runs it; this module only decides what it runs with, so that each
rule is one small function with client-go's behaviour next to it.
"""

from __future__ import annotations

import base64
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

V1 = "client.authentication.k8s.io/v1"
CONFIG_EXTENSION = "client.authentication.k8s.io/exec"
"""The cluster extension handed to the plugin as its cluster's `config`."""
MODES = ("Never", "IfAvailable", "Always")


class ExecSpecError(ValueError):
    """The kubeconfig's exec section says something client-go would refuse."""


def command(spec: Mapping[str, Any], user_directory: Path) -> str:
    """The program to run: a command with a path separator in it is taken from the
    directory of the file that defined the user (client-go's ResolveLocalPaths); a
    bare name is looked up on PATH when it runs."""
    name = str(spec.get("command") or "")
    if os.sep in name and not os.path.isabs(name):
        return str(user_directory / name)
    return name


def located(name: str) -> str:
    """The program a bare name runs: found on our own PATH, as client-go's exec.Command
    finds it, not on the PATH the kubeconfig's `env` may give the plugin (which
    subprocess would search). A name not found there is left as it is (to fail)."""
    if os.sep in name:
        return name
    return shutil.which(name) or name


def environment(spec: Mapping[str, Any]) -> dict[str, str]:
    """The plugin's environment: ours, with the kubeconfig's `env` entries over it."""
    env = dict(os.environ)
    for number, item in enumerate(spec.get("env") or [], start=1):
        if not isinstance(item, Mapping) or not item.get("name"):
            raise ExecSpecError(f"exec: env entry {number} has no name")
        env[str(item["name"])] = str(item.get("value") or "")
    return env


def interactive(spec: Mapping[str, Any], stdin_is_terminal: bool) -> bool:
    """Whether the plugin gets our stdin (and is told it is interactive), by its
    interactiveMode: Never, IfAvailable (when stdin is a terminal; the default of
    v1beta1) or Always (stdin must be a terminal). v1 requires the field."""
    mode = spec.get("interactiveMode")
    if not mode:
        if spec.get("apiVersion") == V1:
            raise ExecSpecError(f"exec: interactiveMode must be set with {V1}")
        mode = "IfAvailable"
    if mode not in MODES:
        raise ExecSpecError(f"exec: interactiveMode {mode!r} is none of {', '.join(MODES)}")
    if mode == "Always" and not stdin_is_terminal:
        raise ExecSpecError(
            "exec: interactiveMode is Always but standard input is not a terminal "
            "(run it from a terminal, or set interactiveMode: IfAvailable)"
        )
    return mode != "Never" and stdin_is_terminal


def stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or replaced by a test runner
        return False


def cluster_info(cluster: Mapping[str, Any], directory: Path) -> dict[str, Any]:
    """The ExecCredential's spec.cluster, as client-go fills it: the CA always as
    data (a certificate-authority file read in), the fields that say how to reach the
    server, and the cluster's exec extension as `config`."""
    info: dict[str, Any] = {"server": str(cluster.get("server") or "")}
    ca = str(cluster.get("certificate-authority-data") or "")
    if not ca and cluster.get("certificate-authority"):
        path = Path(os.path.expanduser(str(cluster["certificate-authority"])))
        ca = base64.b64encode((directory / path).read_bytes()).decode()
    for key, value in (
        ("tls-server-name", cluster.get("tls-server-name")),
        ("insecure-skip-tls-verify", cluster.get("insecure-skip-tls-verify")),
        ("certificate-authority-data", ca),
        ("proxy-url", cluster.get("proxy-url")),
        ("disable-compression", cluster.get("disable-compression")),
    ):
        if value:
            info[key] = value
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == CONFIG_EXTENSION:
            info["config"] = extension.get("extension")
    return info
