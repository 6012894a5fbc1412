#!/usr/bin/env bash
# A real node for hack/cluster.sh's local cluster: containerd 2.x and the kubelet, built from the
# Go module proxy, running real containers with runc (Debian's package) beside kwok's fake node.
# Loopback only: the node's one address is InternalIP 127.0.0.1, pods use the host's network
# (a placeholder CNI plugin refuses any other), and images come from a registry on 127.0.0.1
# holding the test images (test/images) and whatever `push` adds.
#
#   hack/node.sh up       build what is missing, start the registry and the node, wait until the
#                         node is Ready (the cluster must be up; hack/cluster.sh up calls this
#                         when SIDECARSET_REAL_NODE=true)
#   hack/node.sh down     stop the node and the registry; remove its containers, mounts, cgroups
#                         and the Node object (hack/cluster.sh down calls it). Only in a state
#                         directory hack/cluster.sh created, and only what this node started
#   hack/node.sh cgroup   print the name of the node's cgroup (see below)
#   hack/node.sh push NAME:TAG BINARY|IMAGE.tar [ARG|ENV=VALUE...]
#                         push an image to the registry; prints REGISTRY/NAME:TAG
#   hack/node.sh registry print the registry's host:port
#   hack/node.sh cert-manager
#                         run cert-manager on the node (built from its Go modules: hack/certmanager-build.sh)
#                         and wait until its webhook serves; make deploy needs it
#   hack/node.sh deploy-config [DIR]
#                         write a kustomization wrapping DIR (default config/local-node) with the
#                         API server's loopback address for the manager; prints its directory
#                         (make deploy DEPLOY_CONFIG=...)
#   hack/node.sh helm-values
#                         write the Helm values that run dist/chart on this node (localNode, the
#                         API server's loopback address for the manager, the registry's image);
#                         prints the file (helm install -f ...)
#
# The node is named real-node-0 and labelled sidecarset.io/real-node=true. It runs containerd and
# the kubelet in a private mount namespace (hack/realnode/node-ns.sh): the kubelet's changes to
# kernel settings never reach the host. Its daemons, shims and pods live in one cgroup of its own,
# named after the state directory, in every cgroup hierarchy (the kubelet's cgroupRoot): `down`
# kills what is in it and nothing else, never another kubelet's pods. The kubelet serves its API on
# 127.0.0.1 to authenticated clients only (a certificate of the cluster CA, or a token the API
# server vouches for), each request authorized by the API server; the registry takes pushes only
# with the credentials this script makes (node/registry.auth).
# Needs root (runc, cgroups, mounts).
# State: $SIDECARSET_CLUSTER_DIR/node (see hack/cluster.sh).
set -euo pipefail
LOG_PREFIX=node
# shellcheck source=hack/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
TIMEOUT=${SIDECARSET_CLUSTER_TIMEOUT:-60}
REAL_NODE_NAME=real-node-0
NODE_DIR=$STATE_DIR/node
PAUSE_IMAGE=pause:3.10
# The node's cgroup, in every hierarchy under /sys/fs/cgroup: node-ns.sh puts the node's daemons
# (and so containerd's shims) in it in the pids hierarchy, and it is the kubelet's cgroupRoot, so
# every pod cgroup is below it (NODE_CGROUP/kubepods/...) in every hierarchy. Named after the state
# directory: two nodes never share one, and no other kubelet uses it (a cgroupfs kubelet's pods are
# in /kubepods by default).
NODE_CGROUP=sidecarset-node-$(sha256sum <<<"$STATE_DIR" | cut -c1-12)
CGROUP_FS=/sys/fs/cgroup
# The test images: NAME:TAG and the environment baked into each (test/images/testserver).
TEST_IMAGES=(
  "app:v1 VERSION=app-v1"
  "agent:v1 VERSION=agent-v1"
  "agent:v2 VERSION=agent-v2"
  "agent:v3 VERSION=agent-v3"
  "slow-agent:v1 VERSION=slow-agent-v1 EXIT_DELAY=4s"
  "slow-agent:v2 VERSION=slow-agent-v2 EXIT_DELAY=4s"
  "slow-agent:v3 VERSION=slow-agent-v3 EXIT_DELAY=4s"
  "never-ready:v1 VERSION=never-ready-v1 NEVER_READY=true"
)

usage() {
  print_usage "${BASH_SOURCE[0]}"
  exit 2
}

load_node_env() {
  [[ -f $STATE_DIR/node.env ]] || return 1
  # shellcheck disable=SC1091
  source "$STATE_DIR/node.env"
}

# ---- build ----

ensure_runc() {
  command -v runc >/dev/null && return
  [[ $(id -u) == 0 ]] || die "runc is not installed and only root can install it: apt-get install runc"
  log "installing runc from Debian's packages"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runc >/dev/null
}

# node_tools: a directory holding containerd, its runc shim and ctr (built and cached by
# hack/tool.sh), first in the node's PATH so containerd finds its own shim.
node_tools() {
  local d=$NODE_DIR/bin t
  mkdir -p "$d"
  for t in containerd containerd-shim-runc-v2 ctr; do
    "$REPO_ROOT/hack/tool.sh" "$t" "github.com/containerd/containerd/v2/cmd/$t@$CONTAINERD_VERSION" >&2
    cp -L "$REPO_ROOT/bin/$t" "$d/$t"
  done
  echo "$d"
}

# ---- registry and images ----

push() {
  local ref=127.0.0.1:$REGISTRY_PORT/$1
  shift
  SIDECARSET_REGISTRY_AUTH=$NODE_DIR/registry.auth devtool push "$ref" "$@" || die "pushing $ref failed"
  echo "$ref"
}

push_test_images() {
  local bin=$NODE_DIR/images/testserver spec img
  mkdir -p "$NODE_DIR/images"
  (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin" ./test/images/testserver) ||
    die "building test/images/testserver failed"
  push "$PAUSE_IMAGE" "$bin" pause >/dev/null
  for spec in "${TEST_IMAGES[@]}"; do
    read -r -a img <<<"$spec"
    push "${img[0]}" "$bin" "${img[@]:1}" >/dev/null
  done
}

# ---- node configuration ----

write_node_config() {
  local c=$STATE_DIR/certs d=$NODE_DIR
  mkdir -p "$d"/{cni/bin,cni/conf,certs.d/127.0.0.1:"$REGISTRY_PORT",kubelet,pod-logs,containerd}
  new_cert "$c" ca "node-$REAL_NODE_NAME" "/O=system:nodes/CN=system:node:$REAL_NODE_NAME" "$(
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature' 'extendedKeyUsage=clientAuth'
  )"
  # The kubelet's serving certificate, which the API server checks (--kubelet-certificate-authority).
  new_cert "$c" ca "kubelet-$REAL_NODE_NAME" "/O=system:nodes/CN=system:node:$REAL_NODE_NAME" "$(
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature' 'extendedKeyUsage=serverAuth' \
      "subjectAltName=IP:127.0.0.1,DNS:$REAL_NODE_NAME"
  )"
  cat >"$d/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $c/ca.crt
users:
- name: node
  user:
    client-certificate: $c/node-$REAL_NODE_NAME.crt
    client-key: $c/node-$REAL_NODE_NAME.key
contexts:
- name: node
  context: {cluster: local, user: node}
current-context: node
EOF
  install -m 0755 "$REPO_ROOT/hack/realnode/cni-hostnetwork.sh" "$d/cni/bin/hostnetwork-only"
  install -m 0755 "$REPO_ROOT/hack/realnode/cni-hostnetwork.sh" "$d/cni/bin/loopback"
  cat >"$d/cni/conf/10-hostnetwork-only.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "hostnetwork-only", "plugins": [{"type": "hostnetwork-only"}]}
EOF
  cat >"$d/certs.d/127.0.0.1:$REGISTRY_PORT/hosts.toml" <<EOF
server = "http://127.0.0.1:$REGISTRY_PORT"
[host."http://127.0.0.1:$REGISTRY_PORT"]
  capabilities = ["pull", "resolve"]
EOF
  # restrict_oom_score_adj: this machine denies CAP_SYS_RESOURCE, without which runc cannot lower
  # a container's oom_score_adj and every sandbox fails to start.
  cat >"$d/containerd.toml" <<EOF
version = 3
root = "$d/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "127.0.0.1:$REGISTRY_PORT/$PAUSE_IMAGE"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "$d/certs.d"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$d/cni/bin"]
    conf_dir = "$d/cni/conf"
EOF
  # cgroup v1 (this machine's layout) must be allowed explicitly since kubelet 1.35; the pods'
  # cgroups go below the node's own (cgroupRoot). Its API (logs, exec, port-forward) takes no
  # anonymous request: a client shows a certificate of the cluster CA (the API server's kubelet
  # client does) or a token the API server accepts (TokenReview), and the API server authorizes
  # each request (SubjectAccessReview). Eviction
  # thresholds are low: the node shares the machine's disk and memory with everything else.
  cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
readOnlyPort: 0
tlsCertFile: $c/kubelet-$REAL_NODE_NAME.crt
tlsPrivateKeyFile: $c/kubelet-$REAL_NODE_NAME.key
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$NODE_CGROUP
failSwapOn: false
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
podLogsDir: $d/pod-logs
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $c/ca.crt}
authorization: {mode: Webhook}
serializeImagePulls: false
# A mounted Secret follows its object within one pod sync: every 10 s rather than every minute,
# so that a renewed webhook certificate reaches the operator in seconds in the tests.
syncFrequency: 10s
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 30
EOF
}

# make_node_cgroup: NODE_CGROUP in every hierarchy (the kubelet checks that its cgroupRoot exists
# in each), the cpuset one given its parent's CPUs and memory nodes (a new one has none), and the
# record of the pids one, which node-ns.sh joins.
make_node_cgroup() {
  local h
  [[ -d $CGROUP_FS/pids ]] || die "no $CGROUP_FS/pids: the real node needs the cgroup v1 (or hybrid) layout"
  while read -r h; do
    mkdir -p "$h/$NODE_CGROUP"
    if [[ -f $h/cpuset.cpus ]]; then
      cat "$h/cpuset.cpus" >"$h/$NODE_CGROUP/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h/$NODE_CGROUP/cpuset.mems"
    fi
  done < <(cgroup_hierarchies)
  echo "$CGROUP_FS/pids/$NODE_CGROUP" >"$NODE_DIR/cgroup"
}

# deploy_config [BASE]: a kustomization in the node's state directory wrapping BASE (default
# config/local-node) that tells the manager where the API server listens: pods on this node
# reach it only on 127.0.0.1 (the kubelet's KUBERNETES_SERVICE_* name the kubernetes Service,
# and no kube-proxy routes it). Prints the directory, for make deploy's DEPLOY_CONFIG.
deploy_config() {
  local base=${1:-$REPO_ROOT/config/local-node} d=$NODE_DIR/deploy-config
  mkdir -p "$d"
  cat >"$d/kustomization.yaml" <<EOF
resources:
- $(realpath -m --relative-to="$d" "$base")
patches:
- target:
    kind: Deployment
    name: sidecarset-controller-manager
  patch: |-
$(apiserver_env_patch '    ')
EOF
  echo "$d"
}

# apiserver_env_patch INDENT: JSON patch operations adding the API server's loopback address to
# the first container's environment.
apiserver_env_patch() {
  printf '%s- op: add\n%s  path: /spec/template/spec/containers/0/env/-\n%s  value: {name: %s, value: "%s"}\n' \
    "$1" "$1" "$1" KUBERNETES_SERVICE_HOST 127.0.0.1 "$1" "$1" "$1" KUBERNETES_SERVICE_PORT "$APISERVER_PORT"
}

# helm_values: the values that install dist/chart on this node: localNode (config/local-node's
# settings), the API server's loopback address as deploy_config gives it, and the operator's
# image from the node's registry (tag dev, the one make local-cluster pushes). Prints the file.
helm_values() {
  local f=$NODE_DIR/helm-values.yaml
  cat >"$f" <<EOF
localNode: true
image:
  repository: 127.0.0.1:$REGISTRY_PORT/sidecarset-operator
  tag: dev
env:
- {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
- {name: KUBERNETES_SERVICE_PORT, value: "$APISERVER_PORT"}
EOF
  echo "$f"
}

# ---- up ----

node_ready() {
  [[ $(kubectl get node "$REAL_NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

node_registered() { kubectl get node "$REAL_NODE_NAME"; }

node_logs() {
  local f
  for f in "$NODE_DIR/containerd.log" "$NODE_DIR/kubelet.log"; do
    [[ -f $f ]] || continue
    log "last lines of $f:"
    tail -n 20 "$f" | sed 's/^/    /' >&2
  done
}

cmd_up() {
  cluster_up || die "the cluster is not up: run SIDECARSET_REAL_NODE=true hack/cluster.sh up"
  [[ -f $STATE_DIR/certs/apiserver-kubelet-client.crt ]] ||
    die "the cluster's API server has no kubelet client certificate: start it with SIDECARSET_REAL_NODE=true hack/cluster.sh up"
  take_lock "$STATE_DIR.node.lock"
  if load_node_env && running registry && running node && node_ready; then
    log "already up: node $REAL_NODE_NAME Ready, registry 127.0.0.1:$REGISTRY_PORT"
    return
  fi
  [[ $(id -u) == 0 ]] || die "a real node needs root (runc, cgroups, mounts)"
  local start node_start kubelet_bin tools ports
  start=$(now_us)
  stop_node
  ensure_runc
  kubelet_bin=$("$REPO_ROOT/hack/controlplane-build.sh" node | tail -n 1)/kubelet
  tools=$(node_tools)
  read -r -a ports <<<"$(free_ports 3)"
  cat >"$STATE_DIR/node.env" <<EOF
REGISTRY_PORT=${ports[0]}
KUBELET_PORT=${ports[1]}
KUBELET_HEALTHZ_PORT=${ports[2]}
EOF
  load_node_env
  log "binaries ready ($(since "$start"))"

  mkdir -p "$NODE_DIR/registry"
  # Pushing takes these credentials, readable by root only: no other user of the machine can push
  # or replace an image the node runs. Pulls stay anonymous (containerd pulls without any).
  (umask 077 && printf 'sidecarset:%s\n' "$(openssl rand -hex 24)" >"$NODE_DIR/registry.auth")
  start_bg registry "$(devtool_bin)" registry "$REGISTRY_PORT" "$NODE_DIR/registry" "$NODE_DIR/registry.auth"
  wait_for registry "$TIMEOUT" "the registry" http_ok "http://127.0.0.1:$REGISTRY_PORT/v2/" || exit 1
  push_test_images
  log "registry on 127.0.0.1:$REGISTRY_PORT with the test images ($(since "$start"))"

  write_node_config
  make_node_cgroup
  # The API server's kubelet client may use the kubelet's whole API (the kubelet asks the API
  # server, whose RBAC says so).
  kubectl create clusterrolebinding sidecarset-local:apiserver-kubelet-client --clusterrole=system:kubelet-api-admin \
    --user=kube-apiserver-kubelet-client --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  node_start=$(now_us)
  start_bg node unshare --mount --propagation slave "$REPO_ROOT/hack/realnode/node-ns.sh" \
    "$NODE_DIR" "$tools" "$kubelet_bin" \
    --config="$NODE_DIR/kubelet.yaml" --kubeconfig="$NODE_DIR/kubeconfig" --root-dir="$NODE_DIR/kubelet" \
    --cert-dir="$NODE_DIR/kubelet/pki" --hostname-override="$REAL_NODE_NAME" --node-ip=127.0.0.1 \
    --node-labels=sidecarset.io/real-node=true
  wait_for node "$TIMEOUT" "node $REAL_NODE_NAME registered" node_registered || { node_logs; exit 1; }
  # The kubelet refuses a loopback node IP and publishes no address; the API server reaches the
  # kubelet (logs, exec) and hostNetwork pods get their IP through this one. Never a Hostname
  # address: the API server would resolve it through the machine's resolver, off loopback.
  kubectl patch node "$REAL_NODE_NAME" --subresource=status --type=merge \
    -p '{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}]}}' >/dev/null
  wait_for node "$TIMEOUT" "node $REAL_NODE_NAME Ready" node_ready || { node_logs; exit 1; }
  log "node $REAL_NODE_NAME Ready in $(since "$node_start") (up in $(since "$start"))"
}

# ---- cert-manager ----

# cert_manager: cert-manager's controller, webhook and cainjector running as pods on this node,
# from images of the binaries hack/certmanager-build.sh builds from cert-manager's Go modules,
# rendered from cert-manager's own Helm chart (hack/realnode/cert-manager-values.yaml says what
# a host-network, loopback-only node needs). Waits until its Deployments are available and its
# webhook has its CA. Reuses what runs.
cert_manager() {
  local start dir version c
  start=$(now_us)
  dir=$("$REPO_ROOT/hack/certmanager-build.sh" | tail -n 1)
  version=$(sed -n 's/^appVersion: *"*\([^"]*\)"*$/\1/p' "$dir/chart/Chart.yaml")
  [[ -n $version ]] || die "no appVersion in $dir/chart/Chart.yaml"
  for c in controller webhook cainjector; do
    push "cert-manager-$c:$version" "$dir/cert-manager-$c" >/dev/null
  done
  log "cert-manager $version images pushed ($(since "$start"))"
  local k8s_version
  k8s_version=$(kubectl version -o json | devtool json-field serverVersion.gitVersion)
  KUSTOMIZE=$REPO_ROOT/bin/kustomize "$REPO_ROOT/bin/helm" template cert-manager "$dir/chart" -n cert-manager \
    --kube-version "$k8s_version" -f "$REPO_ROOT/hack/realnode/cert-manager-values.yaml" \
    --post-renderer "$REPO_ROOT/hack/realnode/cert-manager-postrender.sh" \
    --set "image.repository=127.0.0.1:$REGISTRY_PORT/cert-manager-controller,image.tag=$version" \
    --set "webhook.image.repository=127.0.0.1:$REGISTRY_PORT/cert-manager-webhook,webhook.image.tag=$version" \
    --set "cainjector.image.repository=127.0.0.1:$REGISTRY_PORT/cert-manager-cainjector,cainjector.image.tag=$version" \
    --set-string "extraEnv[1].value=$APISERVER_PORT,webhook.extraEnv[1].value=$APISERVER_PORT,cainjector.extraEnv[1].value=$APISERVER_PORT" \
    >"$NODE_DIR/cert-manager.yaml" || die "rendering cert-manager's chart failed"
  kubectl create namespace cert-manager --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl apply --server-side --force-conflicts --field-manager=sidecarset-local -f "$NODE_DIR/cert-manager.yaml" >/dev/null
  wait_for - 180 "cert-manager's Deployments to be available" \
    kubectl -n cert-manager wait --for=condition=Available deployment --all --timeout=1s || exit 1
  webhook_ca() {
    [[ -n $(kubectl get validatingwebhookconfiguration cert-manager-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}') ]]
  }
  wait_for - 120 "cert-manager's webhook CA (its cainjector)" webhook_ca || exit 1
  log "cert-manager $version running on $REAL_NODE_NAME ($(since "$start"))"
}

# ---- down ----

# cgroup_hierarchies: the directory of each cgroup hierarchy mounted under CGROUP_FS (the cgroup v1
# ones and the hybrid layout's unified one); aliases (symbolic links such as cpu -> cpu,cpuacct)
# left out.
cgroup_hierarchies() {
  local h
  for h in "$CGROUP_FS"/*/; do
    h=${h%/}
    [[ -L $h ]] || printf '%s\n' "$h"
  done
}

# kill_cgroup_tree DIR: kill every process in the cgroup DIR and below, then remove them all.
kill_cgroup_tree() {
  local dir=$1 procs p i
  [[ -d $dir ]] || return 0
  for ((i = 0; i < 50; i++)); do
    # Pids of processes that still exist (a cgroup lists none other; a fake tree in a test may).
    procs=()
    while read -r p; do
      [[ $p =~ ^[0-9]+$ && -d /proc/$p ]] && procs+=("$p")
    done < <(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null)
    ((${#procs[@]} > 0)) || break
    kill -KILL "${procs[@]}" 2>/dev/null || true
    sleep 0.1
  done
  find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
  [[ ! -d $dir ]] || log "warning: could not remove cgroup $dir"
}

# stop_node: stop what the node started, and only that: its recorded processes (node-ns.sh,
# which stops the kubelet, the containers and containerd; the registry), then whatever is left in
# the node's own cgroup (NODE_CGROUP, in any hierarchy: a daemon that outlived node-ns.sh, shims,
# containers), never a process outside it. Only in a state directory hack/cluster.sh created.
stop_node() {
  require_owned_state
  local h
  stop_bg node
  while read -r h; do
    kill_cgroup_tree "$h/$NODE_CGROUP"
  done < <(cgroup_hierarchies)
  stop_bg registry
  if cluster_up 2>/dev/null; then
    kubectl delete node "$REAL_NODE_NAME" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  fi
  rm -rf "$NODE_DIR"
  rm -f "$STATE_DIR/node.env"
}

cmd_down() {
  [[ -d $STATE_DIR ]] || return 0
  require_owned_state
  load_cluster_env || true
  take_lock "$STATE_DIR.node.lock"
  stop_node
  log "node stopped; its containers, cgroups and $NODE_DIR removed"
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  push)
    shift
    [[ $# -ge 2 ]] || usage
    if ! { load_cluster_env && load_node_env && running registry; }; then
      die "the node's registry is not running: hack/node.sh up"
    fi
    push "$@"
    ;;
  deploy-config)
    shift
    if ! { load_cluster_env && load_node_env; }; then die "the node is not up: hack/node.sh up"; fi
    deploy_config "$@"
    ;;
  helm-values)
    if ! { load_cluster_env && load_node_env; }; then die "the node is not up: hack/node.sh up"; fi
    helm_values
    ;;
  cert-manager)
    if ! { load_cluster_env && load_node_env && running registry; }; then
      die "the node is not up: hack/node.sh up"
    fi
    cert_manager
    ;;
  cgroup) echo "$NODE_CGROUP" ;;
  registry)
    load_node_env || die "the node is not up: hack/node.sh up"
    echo "127.0.0.1:$REGISTRY_PORT"
    ;;
  *) usage ;;
esac
