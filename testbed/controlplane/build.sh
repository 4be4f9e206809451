#!/usr/bin/env bash
# Build the real control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kwok) from the Go modules pinned in go.mod/go.sum beside
# this script, into a per-user cache directory keyed by those pins, the Go
# version and this script. Does nothing when the binaries are there already.
#
#   build.sh            build if needed, then print the binaries' directory
#   build.sh --where    print the directory, build nothing (exit 1 if not built)
#
# The cache: $EKS_DRAINER_CACHE, else $XDG_CACHE_HOME/eks-node-drainer, else
# ~/.cache/eks-node-drainer. Needs Go >= 1.24 and the Go module proxy; the first
# build takes tens of minutes on two cores (kube-apiserver alone links ~3 GB).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools=(
    k8s.io/kubernetes/cmd/kube-apiserver
    k8s.io/kubernetes/cmd/kube-controller-manager
    k8s.io/kubernetes/cmd/kube-scheduler
    go.etcd.io/etcd/server/v3
    sigs.k8s.io/kwok/cmd/kwok
)
binaries=(kube-apiserver kube-controller-manager kube-scheduler etcd kwok)

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: Go is not on PATH; install Go >= 1.24 (https://go.dev/dl/) to build the control plane" >&2
    exit 1
fi

cache_root="${EKS_DRAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eks-node-drainer}"
kube_version="$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes v\([0-9.]*\).*/\1/p' "$here/go.mod" | head -1)"
key="$( (cat "$here/go.mod" "$here/go.sum" "$0"; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-12)"
dest="$cache_root/controlplane/k8s-v$kube_version-$key"

complete() {
    local b
    for b in "${binaries[@]}"; do [ -x "$dest/$b" ] || return 1; done
    [ -f "$dest/.complete" ]
}

if [ "${1:-}" = "--where" ]; then
    echo "$dest"
    complete
    exit
fi

mkdir -p "$cache_root/controlplane"
# Two test workers (or two terminals) may ask at once: one builds, the other waits.
exec 9>"$cache_root/controlplane/.lock"
flock 9
if complete; then
    echo "$dest"
    exit 0
fi

echo "build.sh: building Kubernetes v$kube_version, etcd and kwok from Go modules into $dest" >&2
echo "build.sh: the first build takes a long while (tens of minutes on two cores); later runs reuse it" >&2
started=$(date +%s)
work="$(mktemp -d "$cache_root/controlplane/.build.XYZXXXXXX")"
trap 'rm -rf "$work"' EXIT
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=v$kube_version -X $pkg.gitMajor=${kube_version%%.*}"
minor="${kube_version#*.}"
ldflags="$ldflags -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=clean"
(
    cd "$here"
    # -mod=readonly: go.sum is the record of what we build; never rewrite it here.
    GOFLAGS="-mod=readonly" CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$work/" "${tools[@]}"
)
# go names the binary of a module path ending in /v3 after the element before it.
for n in server v3; do
    if [ -e "$work/$n" ]; then mv "$work/$n" "$work/etcd"; fi
done
touch "$work/.complete"
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
echo "build.sh: built in $(( $(date +%s) - started )) s" >&2
echo "$dest"
