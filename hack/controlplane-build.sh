#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries from the Go module proxy (no binary downloads)
# and caches them in a per-user directory keyed by versions, so a fresh clone reuses them.
#
#   hack/controlplane-build.sh envtest   kube-apiserver, etcd, kubectl   (what `make test` needs)
#   hack/controlplane-build.sh all       envtest + kube-controller-manager, kube-scheduler, kwok
#   hack/controlplane-build.sh node      all + kubelet (a real node; containerd comes from hack/node.sh)
#
# Prints the directory holding the binaries on its last line of stdout; progress goes to stderr.
# Safe to run concurrently: a lock serialises builds of the same versions.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.0}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
set_name=${1:-envtest}

cache_root=${SIDECARSET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sidecarset-operator}
dest="$cache_root/controlplane/k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_$(go env GOOS)-$(go env GOARCH)"

case "$set_name" in
  envtest) want=(kube-apiserver etcd kubectl) ;;
  all) want=(kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kwok) ;;
  node) want=(kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kwok kubelet) ;;
  *) echo "usage: $0 envtest|all|node" >&2; exit 2 ;;
esac

log() { printf '[controlplane] %s\n' "$*" >&2; }

missing() {
  local b
  for b in "${want[@]}"; do [[ -x "$dest/$b" ]] || echo "$b"; done
}

mkdir -p "$dest"
if [[ -z $(missing) ]]; then
  echo "$dest"
  exit 0
fi

exec 9>"$dest/.lock"
flock 9
mapfile -t todo < <(missing)
if [[ ${#todo[@]} -eq 0 ]]; then
  echo "$dest"
  exit 0
fi
log "building ${todo[*]} into $dest (cold: about 10 minutes on 2 cores)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod

need() { local b; for b in "${todo[@]}"; do [[ $b == "$1" ]] && return 0; done; return 1; }

build_kubernetes() {
  local mod="$work/kubernetes" gomod minor
  mkdir -p "$mod"
  gomod=$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p') || true
  if [[ -z $gomod ]]; then
    log "k8s.io/kubernetes@${K8S_VERSION} is not served by the Go module proxy: pick another patch release"
    go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"Error": //p' >&2 || true
    return 1
  fi
  # kubernetes' go.mod replaces its staging modules with local paths, which `go install` refuses;
  # a wrapper module points each of them at the published staging version instead.
  local staging_version="v0.${K8S_VERSION#v1.}"
  {
    printf 'module local/controlplane\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\n' "$K8S_VERSION"
    sed -n "s#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/[a-z0-9-]*#replace \1 => \1 ${staging_version}#p" "$gomod"
  } >"$mod/go.mod"
  printf 'package tools\n\nimport (\n' >"$mod/tools.go"
  local cmds=() c
  for c in kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet; do
    need "$c" && cmds+=("k8s.io/kubernetes/cmd/$c")
  done
  [[ ${#cmds[@]} -gt 0 ]] || return 0
  for c in "${cmds[@]}"; do printf '\t_ "%s"\n' "$c" >>"$mod/tools.go"; done
  printf ')\n' >>"$mod/tools.go"
  sed -i '1i //go:build tools\n' "$mod/tools.go"
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=${K8S_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor} -X $p.gitTreeState=clean"
  done
  (cd "$mod" && go mod tidy)
  for c in "${cmds[@]}"; do
    log "go build ${c##*/}"
    (cd "$mod" && go build -trimpath -ldflags "$ld" -o "$work/out/${c##*/}" "$c")
  done
}

build_etcd() {
  need etcd || return 0
  local mod="$work/etcd"
  mkdir -p "$mod"
  printf 'module local/etcd\n\ngo 1.26\n' >"$mod/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$mod/tools.go"
  log "go build etcd"
  (cd "$mod" && go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" && go mod tidy &&
    go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
  need kwok || return 0
  log "go build kwok"
  GOBIN="$work/out" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
  # kwok refuses to start without Stage objects; the defaults ship in its module directory.
  local dir
  dir=$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  local s
  for s in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
    pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    printf -- '---\n' >>"$work/out/kwok-stages.yaml"
    cat "$dir/kustomize/stage/$s.yaml" >>"$work/out/kwok-stages.yaml"
  done
}

mkdir -p "$work/out"
build_etcd
build_kubernetes
build_kwok
for f in "$work/out"/*; do
  chmod a+rx "$f"
  mv -f "$f" "$dest/"
done
log "done: $(find "$dest" -mindepth 1 -maxdepth 1 ! -name .lock -printf "%f ")"
echo "$dest"
