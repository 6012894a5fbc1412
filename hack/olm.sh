#!/usr/bin/env bash
# OLM (operator-lifecycle-manager) on a local cluster of hack/cluster.sh, without a container
# runtime: OLM's `olm` and `catalog` operators run as host processes, and `opm serve` serves a
# file-based catalog whose bundles carry their manifests inline (image ""), so OLM installs
# them without unpacking a bundle image.
#
#   hack/olm.sh build        build bin/olm and bin/olm-catalog (OLM_VERSION, default v0.46.0)
#                            from the Go module proxy, cached per user and version
#   hack/olm.sh up [DIR]     on the running cluster: OLM's CRDs (Established), the namespaces
#                            olm and operators, the olm and catalog operators (each /healthz
#                            ready), and `opm serve` of the catalog DIR (default catalog/) as
#                            "catalog"; a fast no-op for what already runs
#   hack/olm.sh serve NAME DIR
#                            (re)start an `opm serve` of a snapshot of the catalog DIR as NAME;
#                            prints its port
#   hack/olm.sh unserve NAME stop the catalog server NAME
#   hack/olm.sh down         stop every catalog server and both operators (the cluster stays up;
#                            `hack/cluster.sh down` stops them too)
#   hack/olm.sh env          print OLM_* variables: binaries, ports, catalog servers
#
# The cluster is the one of SIDECARSET_CLUSTER_DIR (hack/cluster.sh); run OLM on a cluster of
# its own: it owns the CRDs and webhooks of what it installs. State: pids/, logs/, olm.env and
# olm/ (certificates, catalog snapshots) in that directory.
#
# Every listener is on 127.0.0.1 except `opm serve`, which binds every interface on its port
# (it has no address flag; nothing here sends it traffic but through 127.0.0.1). OLM v0.46.0
# hard-codes its health and metrics server at :8080 (:8443 with TLS) on every interface, with
# no flag to move or disable it, so `build` compiles OLM from a copy of its module with one
# function changed: getAddress in pkg/lib/server returns $OLM_HEALTH_ADDRESS when it is set.
# Nothing else in OLM changes. (A Go build overlay cannot do this: it refuses files in the
# module cache.)
set -euo pipefail
LOG_PREFIX=olm
# shellcheck source=hack/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

OLM_VERSION=${OLM_VERSION:-v0.46.0}
OLM_MODULE=github.com/operator-framework/operator-lifecycle-manager
# OLM's CRDs ship in the operator-framework/api module, at the version the operator's go.mod
# requires (OLM v0.46.0 itself requires api v0.45.0).
API_MODULE=github.com/operator-framework/api
OLM_BIN=$REPO_ROOT/bin/olm
CATALOG_BIN=$REPO_ROOT/bin/olm-catalog
OPM=${OPM:-$REPO_ROOT/bin/opm}
TIMEOUT=${SIDECARSET_CLUSTER_TIMEOUT:-60}
OLM_NAMESPACE=olm
OLM_DIR=$STATE_DIR/olm
OLM_ENV=$STATE_DIR/olm.env
# The processes this script starts, in start order; catalog servers are named catalog*.
OLM_OPERATORS=(olm olm-catalog)

usage() {
  print_usage "${BASH_SOURCE[0]}"
  exit 2
}

# ---- build ----

# patch_server_go FILE: getAddress honours OLM_HEALTH_ADDRESS. The edits are checked, so a
# different OLM version whose file does not match fails loudly.
patch_server_go() {
  local f=$1
  sed -i -e 's#^\t"net/http"$#\t"net/http"\n\t"os"#' \
    -e 's#^func (sc \*serverConfig) getAddress(tlsEnabled bool) string {$#&\n\tif addr := os.Getenv("OLM_HEALTH_ADDRESS"); addr != "" {\n\t\treturn addr\n\t}#' \
    "$f"
  [[ $(grep -c 'OLM_HEALTH_ADDRESS' "$f") == 1 && $(grep -c '^	"os"$' "$f") == 1 ]] ||
    die "$f is not what patch_server_go expects (OLM $OLM_VERSION); update it"
}

# cmd_build: both binaries from one wrapper module (see hack/tool.sh for why a wrapper) that
# replaces OLM's module with a patched copy, into a per-user cache keyed by OLM's version, the
# patch and Go's version; linked into bin/.
cmd_build() {
  local cache_root dir start work
  cache_root=${SIDECARSET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sidecarset-operator}
  dir="$cache_root/tools/olm-$OLM_VERSION+health-address-$(go env GOOS)-$(go env GOARCH)-$(go env GOVERSION)"
  if [[ ! -x $dir/olm || ! -x $dir/olm-catalog ]]; then
    start=$(now_us)
    log "building olm and catalog $OLM_VERSION from the Go module proxy (about 6 minutes cold)"
    work=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" EXIT
    mkdir -p "$dir"
    (
      cd "$work"
      printf 'module local/tool\n\ngo 1.26\n' >go.mod
      export GOFLAGS=-mod=mod CGO_ENABLED=0
      go get "$OLM_MODULE/cmd/olm@$OLM_VERSION" "$OLM_MODULE/cmd/catalog@$OLM_VERSION"
      local mod commit
      mod=$(go list -m -f '{{.Dir}}' "$OLM_MODULE")
      commit=$(go mod download -json "$OLM_MODULE@$OLM_VERSION" | devtool json-field Origin.Hash unknown)
      cp -r "$mod" olm-src
      chmod -R u+w olm-src
      patch_server_go olm-src/pkg/lib/server/server.go
      go mod edit -replace "$OLM_MODULE=./olm-src"
      mkdir out
      go build -trimpath -tags containers_image_openpgp \
        -ldflags "-s -w -X $OLM_MODULE/pkg/version.OLMVersion=$OLM_VERSION -X $OLM_MODULE/pkg/version.GitCommit=$commit" \
        -o out/ "$OLM_MODULE/cmd/olm" "$OLM_MODULE/cmd/catalog"
      mv -f out/olm "$dir/olm"
      mv -f out/catalog "$dir/olm-catalog"
    )
    rm -rf "$work"
    trap - EXIT
    log "built olm and olm-catalog $OLM_VERSION into $dir ($(since "$start"))"
  fi
  mkdir -p "$REPO_ROOT/bin"
  ln -sfn "$dir/olm" "$OLM_BIN"
  ln -sfn "$dir/olm-catalog" "$CATALOG_BIN"
}

# ---- up ----

require_cluster() {
  cluster_up || die "the cluster of $STATE_DIR is not up: run hack/cluster.sh up (with the same SIDECARSET_CLUSTER_DIR)"
}

# set_env KEY VALUE: record KEY=VALUE in olm.env, or remove KEY when VALUE is empty. free_ports
# skips every *_PORT recorded there.
set_env() {
  touch "$OLM_ENV"
  sed -i "/^$1=/d" "$OLM_ENV"
  [[ -z $2 ]] || echo "$1=$2" >>"$OLM_ENV"
}

install_crds() {
  local start dir crds
  start=$(now_us)
  dir=$(cd "$REPO_ROOT" && go mod download -json "$API_MODULE" | devtool json-field Dir) ||
    die "go mod download $API_MODULE failed"
  [[ -d $dir/crds ]] || die "$dir has no crds/ directory"
  crds=$(kubectl apply --server-side --force-conflicts --field-manager=sidecarset-olm -f "$dir/crds" -o name)
  # shellcheck disable=SC2086
  kubectl wait --for=condition=Established --timeout="${TIMEOUT}s" $crds >/dev/null
  printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n---\n' "$OLM_NAMESPACE" operators |
    kubectl apply --server-side --field-manager=sidecarset-olm -f - >/dev/null
  log "OLM's CRDs ($(wc -w <<<"$crds") from $API_MODULE) Established; namespaces $OLM_NAMESPACE and operators ($(since "$start"))"
}

# gen_serving_cert: a serving certificate for 127.0.0.1 from the cluster's CA, for the health
# and metrics servers of both operators (curl checks them against the cluster's ca.crt).
gen_serving_cert() {
  local d=$OLM_DIR/certs
  [[ -f $d/serving.crt ]] && return
  mkdir -p "$d"
  new_cert "$STATE_DIR/certs" ca olm-serving "/CN=olm-local" "$(
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature' \
      'extendedKeyUsage=serverAuth' 'subjectAltName=IP:127.0.0.1,DNS:localhost'
  )"
  mv "$STATE_DIR/certs/olm-serving.crt" "$d/serving.crt"
  mv "$STATE_DIR/certs/olm-serving.key" "$d/serving.key"
}

healthz() { http_ok --cacert "$STATE_DIR/certs/ca.crt" "https://127.0.0.1:$1/healthz"; }

# start_operator NAME PORT_KEY CMD...: start one of OLM's operators with TLS and its health
# server on a free loopback port (recorded as PORT_KEY), and wait for its /healthz. The
# certificate flags also make its command line name the state directory, which is how
# stop_bg recognises the process as ours.
start_operator() {
  local name=$1 key=$2 port start
  shift 2
  if running "$name"; then
    log "$name already runs (pid $(recorded_pid "$name"))"
    return
  fi
  start=$(now_us)
  port=$(free_ports 1)
  set_env "$key" "$port"
  start_bg "$name" env OLM_HEALTH_ADDRESS="127.0.0.1:$port" "$@" \
    --tls-cert="$OLM_DIR/certs/serving.crt" --tls-key="$OLM_DIR/certs/serving.key"
  wait_for "$name" "$TIMEOUT" "$name /healthz" healthz "$port" || exit 1
  log "$name ready: pid $(recorded_pid "$name"), https://127.0.0.1:$port/healthz, log $(log_file "$name") ($(since "$start"))"
}

start_operators() {
  [[ -x $OLM_BIN && -x $CATALOG_BIN ]] || die "bin/olm or bin/olm-catalog is missing: run hack/olm.sh build"
  gen_serving_cert
  # --writeStatusName "": no OpenShift ClusterOperator status. OPERATOR_NAMESPACE and
  # OPERATOR_NAME are what OLM's own Deployment sets; `olm` reads the kubeconfig from
  # $KUBECONFIG only.
  start_operator olm OLM_HEALTH_PORT \
    env KUBECONFIG="$KUBECONFIG_FILE" OPERATOR_NAMESPACE="$OLM_NAMESPACE" OPERATOR_NAME=olm-operator \
    "$OLM_BIN" --namespace="$OLM_NAMESPACE" --writeStatusName=""
  start_operator olm-catalog OLM_CATALOG_HEALTH_PORT \
    "$CATALOG_BIN" --kubeconfig="$KUBECONFIG_FILE" --namespace="$OLM_NAMESPACE" --writeStatusName=""
}

cmd_up() {
  local start dir
  dir=$(realpath "${1:-$REPO_ROOT/catalog}")
  start=$(now_us)
  require_cluster
  mkdir -p "$OLM_DIR"
  install_crds
  start_operators
  if running catalog; then
    log "catalog already serves on 127.0.0.1:$(port_of catalog)"
  else
    serve catalog "$dir" >/dev/null
  fi
  log "OLM up in $(since "$start"); a CatalogSource with spec.address 127.0.0.1:$(port_of catalog) reads $dir"
}

# ---- catalog servers ----

check_catalog_name() {
  [[ $1 =~ ^catalog(-[a-z0-9]+)*$ ]] || die "catalog server name '$1' must be catalog or catalog-<suffix>"
}

# port_key NAME: catalog -> CATALOG_PORT, catalog-upgrade -> CATALOG_UPGRADE_PORT.
port_key() { echo "$(tr 'a-z-' 'A-Z_' <<<"$1")_PORT"; }
port_of() { sed -n "s/^$(port_key "$1")=//p" "$OLM_ENV" 2>/dev/null; }

listening() { [[ -n $(ss -Hltn "sport = :$1") ]]; }

# serve NAME DIR: `opm serve` a snapshot of the catalog DIR as NAME and print its port. opm
# reads a catalog once, at start; the snapshot lives in the state directory, so the command
# line names it and stop_bg recognises the process as ours.
serve() {
  local name=$1 src=$2 snap port start
  check_catalog_name "$name"
  [[ -d $src ]] || die "catalog directory $src does not exist"
  [[ -x $OPM ]] || die "$OPM is missing: run make opm"
  unserve "$name"
  start=$(now_us)
  snap=$OLM_DIR/catalogs/$name
  mkdir -p "$snap"
  cp -r "$src/." "$snap/"
  port=$(free_ports 1)
  set_env "$(port_key "$name")" "$port"
  # --pprof-addr "": no profiling endpoint (it defaults to localhost:6060). The gRPC port binds
  # every interface: opm has no address flag.
  start_bg "$name" "$OPM" serve "$snap" --port="$port" --pprof-addr="" \
    --termination-log="$STATE_DIR/logs/$name.termination.log"
  wait_for "$name" "$TIMEOUT" "$name gRPC on port $port" listening "$port" || exit 1
  log "$name serves $src on 127.0.0.1:$port: pid $(recorded_pid "$name") ($(since "$start"))"
  echo "$port"
}

unserve() {
  check_catalog_name "$1"
  stop_bg "$1"
  set_env "$(port_key "$1")" ""
  rm -rf "$OLM_DIR/catalogs/$1"
}

# ---- down, env ----

cmd_down() {
  local f i
  if [[ ! -d $STATE_DIR ]]; then
    log "nothing to stop ($STATE_DIR does not exist)"
    return
  fi
  for f in "$STATE_DIR"/pids/catalog*.pid; do
    [[ -e $f ]] && unserve "$(basename "$f" .pid)"
  done
  for ((i = ${#OLM_OPERATORS[@]} - 1; i >= 0; i--)); do stop_bg "${OLM_OPERATORS[i]}"; done
  rm -rf "$OLM_DIR" "$OLM_ENV"
  log "OLM stopped; its CRDs and namespaces stay until hack/cluster.sh down"
}

cmd_env() {
  [[ -f $OLM_ENV ]] || die "OLM is not up on $STATE_DIR: run hack/olm.sh up"
  echo "OLM_BIN=$OLM_BIN"
  echo "OLM_CATALOG_BIN=$CATALOG_BIN"
  cat "$OLM_ENV"
}

with_cluster() {
  load_cluster_env || die "the cluster of $STATE_DIR is not up: run hack/cluster.sh up"
  take_lock "$STATE_DIR.olm.lock"
}

case ${1:-} in
  build) cmd_build ;;
  up)
    (($# <= 2)) || usage
    with_cluster
    cmd_up "${2:-}"
    ;;
  serve)
    (($# == 3)) || usage
    with_cluster
    require_cluster
    mkdir -p "$OLM_DIR"
    serve "$2" "$(realpath "$3")"
    ;;
  unserve)
    (($# == 2)) || usage
    take_lock "$STATE_DIR.olm.lock"
    unserve "$2"
    ;;
  down)
    take_lock "$STATE_DIR.olm.lock"
    cmd_down
    ;;
  env) cmd_env ;;
  *) usage ;;
esac
