#!/usr/bin/env bash
# Build kubectl for the tests (tests/conftest.py's kubectl_binary, when none is on
# PATH): k8s.io/kubernetes/cmd/kubectl from the module pinned in go.mod/go.sum beside
# this script, which must be the release testbed/controlplane/go.mod pins, into the
# cache the control plane's build uses, keyed by those pins, the Go version and this
# script. Does nothing when it is there already. Prints the binary's path.
#
# Needs Go >= 1.24 and, the first time, the Go module proxy; the build takes a few
# minutes on two cores.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version() { sed -n 's/^[[:space:]]*k8s.io\/kubernetes v\([0-9.]*\).*/\1/p' "$1" | head -1; }
kube_version="$(version "$here/go.mod")"
pinned="$(version "$here/../controlplane/go.mod")"
if [ "$kube_version" != "$pinned" ]; then
    echo "build.sh: testbed/kubectl/go.mod pins Kubernetes v$kube_version, the control plane v$pinned:" \
        "copy the control plane's version and replace block into it, then run go mod tidy there" >&2
    exit 1
fi
if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: Go is not on PATH; install Go >= 1.24 (https://go.dev/dl/) to build kubectl," \
        "or put a kubectl on PATH" >&2
    exit 1
fi

cache_root="${EKS_DRAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eks-node-drainer}"
key="$( (cat "$here/go.mod" "$here/go.sum" "$0"; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-12)"
dest="$cache_root/kubectl/k8s-v$kube_version-$key"
if [ -x "$dest/kubectl" ]; then
    echo "$dest/kubectl"
    exit 0
fi

mkdir -p "$cache_root/kubectl"
# Two test workers may ask at once: one builds, the other waits.
exec 9>"$cache_root/kubectl/.lock"
flock 9
if [ -x "$dest/kubectl" ]; then
    echo "$dest/kubectl"
    exit 0
fi
echo "build.sh: building kubectl v$kube_version from Go modules into $dest (a few minutes)" >&2
work="$(mktemp -d "$cache_root/kubectl/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
pkg=k8s.io/component-base/version
minor="${kube_version#*.}"
ldflags="-s -w -X $pkg.gitVersion=v$kube_version -X $pkg.gitMajor=${kube_version%%.*}"
ldflags="$ldflags -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=clean"
(
    cd "$here"
    GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
        go build -trimpath -ldflags "$ldflags" -o "$work/kubectl" k8s.io/kubernetes/cmd/kubectl
)
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
echo "$dest/kubectl"
