#!/usr/bin/env bash
# Builds cert-manager's controller, webhook and cainjector (static binaries) and copies its Helm
# chart, from the Go module proxy (no image pulls, no binary downloads), into a per-user cache
# keyed by cert-manager's version, the platform, Go's version and the launcher sources below.
#
#   hack/certmanager-build.sh
#
# CERT_MANAGER_VERSION defaults to the version of github.com/cert-manager/cert-manager in go.mod.
# Prints the cache directory on its last line of stdout; progress goes to stderr. It holds
#   cert-manager-controller  cert-manager-webhook  cert-manager-cainjector  chart/
# chart/ is writable and its Chart.yaml carries version and appVersion = CERT_MANAGER_VERSION.
# Safe to run concurrently: a lock serialises builds of the same key.
#
# Why hack/certmanager/: cert-manager keeps each binary's main package in a module of its own
# whose module path (e.g. github.com/cert-manager/cert-manager/controller-binary) is not its
# directory in the repository and is never tagged, so no Go module proxy serves it. Only the root
# module is on the proxy, and it holds everything the binaries run. hack/certmanager/ is one small
# module of our own with a launcher per binary (see its README.md): each reads the configuration
# and flags the chart gives it and starts the root module's servers and control loops. This
# script builds them in a copy of that module that requires the root module at
# CERT_MANAGER_VERSION. Its module path is below github.com/cert-manager/cert-manager because the
# launchers import the root module's internal/ packages, which Go allows only from below there;
# they use the root module's APIs directly, so a cert-manager minor that changes them fails here.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/hack/certmanager"
CM_MODULE=github.com/cert-manager/cert-manager
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-$(awk -v m="$CM_MODULE" '$1 == m { print $2; exit }' "$root/go.mod")}
[[ -n $CERT_MANAGER_VERSION ]] || { echo "[cert-manager] $CM_MODULE is not in $root/go.mod: set CERT_MANAGER_VERSION" >&2; exit 2; }
components=(controller webhook cainjector)

log() { printf '[cert-manager] %s\n' "$*" >&2; }

# The launchers' sources are part of the key: changing them rebuilds.
src_hash=$(cd "$src" && find . -type f \( -name '*.go' -o -name go.mod \) -print0 | LC_ALL=C sort -z |
  xargs -0 sha256sum | sha256sum | cut -c1-12)
cache_root=${SIDECARSET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sidecarset-operator}
dest="$cache_root/cert-manager/${CERT_MANAGER_VERSION}_$(go env GOOS)-$(go env GOARCH)_$(go env GOVERSION)_src-${src_hash}"

complete() {
  local c
  for c in "${components[@]}"; do [[ -x $dest/cert-manager-$c ]] || return 1; done
  [[ -f $dest/chart/Chart.yaml ]]
}

mkdir -p "$dest"
if complete; then
  echo "$dest"
  exit 0
fi
exec 9>"$dest/.lock"
flock 9
if complete; then
  echo "$dest"
  exit 0
fi

log "building cert-manager $CERT_MANAGER_VERSION into $dest (cold: about 10 minutes on 2 cores)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$work/out"
# The version shows in --version, in the User-Agent and in logs; the proxy does not say the commit.
ldflags="-s -w -X $CM_MODULE/pkg/util.AppVersion=$CERT_MANAGER_VERSION"

# Floors for dependencies whose version, as cert-manager's go.mod requires it, the module proxy
# lists but refuses to serve (403 on the .zip); the next patch release is served. MVS keeps any
# higher version a newer cert-manager requires.
floors=(github.com/Venafi/vcert/v5@v5.13.8)

# The launchers' module, requiring the root module at the version to build (MVS settles the rest).
cp -r "$src" "$work/launchers"
chmod -R u+w "$work/launchers"
(
  cd "$work/launchers"
  go mod edit -require="$CM_MODULE@$CERT_MANAGER_VERSION" "${floors[@]/#/-require=}"
  go mod tidy
)

# One component at a time, to keep the machine light; they share the build cache.
for c in "${components[@]}"; do
  start=$SECONDS
  (cd "$work/launchers" && go build -trimpath -ldflags "$ldflags" -o "$work/out/cert-manager-$c" "./$c")
  log "built cert-manager-$c ($((SECONDS - start))s)"
done

# The chart is in the root module's source; its Chart.yaml carries v0.0.0 placeholders that
# cert-manager's release tooling fills in.
mod_dir=$(cd "$work/launchers" && go list -m -f '{{.Dir}}' "$CM_MODULE")
cp -r "$mod_dir/deploy/charts/cert-manager" "$work/out/chart"
chmod -R u+w "$work/out/chart"
sed -i -E "s/^(version|appVersion): .*/\1: $CERT_MANAGER_VERSION/" "$work/out/chart/Chart.yaml"
[[ $(grep -cE "^(version|appVersion): $CERT_MANAGER_VERSION\$" "$work/out/chart/Chart.yaml") == 2 ]] ||
  { log "ERROR: $mod_dir/deploy/charts/cert-manager/Chart.yaml has no version/appVersion lines to set"; exit 1; }

rm -rf "$dest/chart"
mv "$work/out/chart" "$dest/chart"
for c in "${components[@]}"; do
  chmod a+rx "$work/out/cert-manager-$c"
  mv -f "$work/out/cert-manager-$c" "$dest/"
done
log "done: $(find "$dest" -mindepth 1 -maxdepth 1 ! -name .lock -printf '%f ')"
echo "$dest"
