#!/usr/bin/env bash
# Builds one Go tool from the Go module proxy (never a binary download) into a per-user cache
# keyed by its version, and links it into the project's bin/ directory.
#
#   hack/tool.sh NAME PACKAGE@VERSION [BUILD_TAGS] [LDFLAGS]
#
# A throw-away wrapper module is used for every tool: it keeps the tool's dependencies out of
# the operator's go.mod and works for modules whose version list the proxy refuses (every
# github.com/operator-framework module), since it only ever asks for an explicit version.
set -euo pipefail

name=$1 pkgver=$2 tags=${3:-} ldflags=${4:-}
pkg=${pkgver%@*} version=${pkgver##*@}
root=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${SIDECARSET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sidecarset-operator}
cached="$cache_root/tools/$name-$version-$(go env GOOS)-$(go env GOARCH)-$(go env GOVERSION)/$name"
link="$root/bin/$name"

if [[ ! -x $cached ]]; then
  echo "[tool] building $name $version from the Go module proxy" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$(dirname "$cached")"
  (
    cd "$work"
    printf 'module local/tool\n\ngo 1.26\n' >go.mod
    GOFLAGS=-mod=mod go get "$pkg@$version"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$cached.tmp.$$" "$pkg"
  )
  # A per-process temporary name: two builds of the same tool at once (two make targets, two
  # checkouts) each rename their own finished binary into place.
  mv -f "$cached.tmp.$$" "$cached"
fi
mkdir -p "$root/bin"
ln -sfn "$cached" "$link"
