#!/usr/bin/env bash
# Build the AWS Lambda Runtime Interface Emulator (aws-lambda-rie) from the Go
# module pinned in go.mod/go.sum beside this script, into the per-user cache the
# control plane uses (testbed/controlplane/build.sh), keyed by the pins, the Go
# version and this script. Does nothing when the binary is there already.
#
#   build.sh            build if needed, then print the binary's path
#   build.sh --where    print the path, build nothing (exit 1 if not built)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module=github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: Go is not on PATH; install Go >= 1.24 (https://go.dev/dl/) to build aws-lambda-rie" >&2
    exit 1
fi

cache_root="${EKS_DRAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eks-node-drainer}"
key="$( (cat "$here/go.mod" "$here/go.sum" "$0"; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-12)"
dest="$cache_root/lambdarie/$key"

if [ "${1:-}" = "--where" ]; then
    echo "$dest/aws-lambda-rie"
    [ -x "$dest/aws-lambda-rie" ]
    exit
fi

mkdir -p "$cache_root/lambdarie"
exec 9>"$cache_root/lambdarie/.lock"
flock 9
if [ -x "$dest/aws-lambda-rie" ]; then
    echo "$dest/aws-lambda-rie"
    exit 0
fi
echo "build.sh: building aws-lambda-rie from its Go module into $dest" >&2
work="$(mktemp -d "$cache_root/lambdarie/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
(
    cd "$here"
    GOFLAGS="-mod=readonly" CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/" "$module"
)
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
echo "$dest/aws-lambda-rie"
