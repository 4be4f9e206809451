"""OpenAPI v3 documents: just enough for kubectl to find that every kind accepts the
`fieldValidation` query parameter, so `kubectl create -f` validates on the server
(as it does against a real cluster) instead of downloading full schemas.
"""

from __future__ import annotations

from typing import Any

from kubesim.resources import GROUP_VERSIONS, VIRTUAL


def _prefix(group_version: str) -> str:
    return "api/" + group_version if "/" not in group_version else "apis/" + group_version


def _root() -> dict[str, Any]:
    return {
        "paths": {
            _prefix(gv): {"serverRelativeURL": f"/openapi/v3/{_prefix(gv)}?hash=kubesim"}
            for gv in GROUP_VERSIONS
        }
    }


def _group_version(group_version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for resource in GROUP_VERSIONS[group_version]:
        if resource.key in VIRTUAL:
            continue
        gvk = {"group": resource.group, "version": resource.version, "kind": resource.kind}
        base = "/" + _prefix(group_version)
        if resource.namespaced:
            base += "/namespaces/{namespace}"
        operation = {
            "operationId": f"patch{resource.kind}",
            "x-kubernetes-group-version-kind": gvk,
            "x-kubernetes-action": "patch",
            "parameters": [
                {
                    "name": "fieldValidation",
                    "in": "query",
                    "schema": {"type": "string", "uniqueItems": True},
                },
                {
                    "name": "fieldManager",
                    "in": "query",
                    "schema": {"type": "string", "uniqueItems": True},
                },
                {
                    "name": "dryRun",
                    "in": "query",
                    "schema": {"type": "string", "uniqueItems": True},
                },
            ],
            "responses": {"200": {"description": "OK"}},
        }
        paths[f"{base}/{resource.plural}/{{name}}"] = {"patch": operation}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubesim)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def document(path: str) -> dict[str, Any] | None:
    if path == "/openapi/v3":
        return _root()
    prefix = "/openapi/v3/"
    if not path.startswith(prefix):
        return None
    rest = path[len(prefix) :]
    if rest.startswith("api/"):
        group_version = rest[len("api/") :]
    elif rest.startswith("apis/"):
        group_version = rest[len("apis/") :]
    else:
        return None
    if group_version not in GROUP_VERSIONS:
        return None
    return _group_version(group_version)
