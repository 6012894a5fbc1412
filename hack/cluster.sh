#!/usr/bin/env bash
# A real, local Kubernetes control plane for demos and end-to-end tests: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok (one fake node, kwok-node-0) as plain host
# processes on free 127.0.0.1 ports. No container runtime: kwok marks pods Running and Ready.
#
#   hack/cluster.sh up       start it (a fast no-op when it already runs)
#   hack/cluster.sh down     stop every process recorded in the state directory, remove it
#   hack/cluster.sh status   what runs where; exit 0 only when the cluster is up
#   hack/cluster.sh env      print `export KUBECONFIG=...`
#   hack/cluster.sh kubectl ARGS...   kubectl against this cluster
#
# State (certificates, admin kubeconfig, logs, pids, ports, etcd data):
# ${SIDECARSET_CLUSTER_DIR:-<repo>/bin/cluster}. Progress goes to stderr.
# SIDECARSET_CLUSTER_TIMEOUT (seconds, default 60) bounds each readiness wait.
# SIDECARSET_REAL_NODE=true adds a real node (containerd and the kubelet, hack/node.sh) beside
# kwok's, and has the API server reach kubelets through their InternalIP (the real node's is
# 127.0.0.1; a hostname would be resolved off loopback) with a client certificate of its own,
# checking theirs against the cluster CA.
# SIDECARSET_APISERVER_PROFILING=true serves the API server's /debug/pprof (make bench-scale's
# SIDECARSET_SCALE_PROFILE_DIR reads it); off by default, as in production.
# SIDECARSET_KWOK_NODE_LEASE_SECONDS (default 40) is the node lease kwok keeps for each of its
# nodes, renewed every quarter of it; when set, the controller manager waits as long before it
# calls a node unreachable. make bench-envelope raises it so that thousands of nodes' heartbeats
# do not take the cores the measured work needs.
set -euo pipefail
LOG_PREFIX=cluster
# shellcheck source=hack/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

TIMEOUT=${SIDECARSET_CLUSTER_TIMEOUT:-60}
APISERVER_PROFILING=${SIDECARSET_APISERVER_PROFILING:-false}
REAL_NODE=${SIDECARSET_REAL_NODE:-false}
NODE_LEASE_SECONDS=${SIDECARSET_KWOK_NODE_LEASE_SECONDS:-40}
NODE_NAME=kwok-node-0

usage() {
  print_usage "${BASH_SOURCE[0]}"
  exit 2
}

# ---- up ----

gen_certs() {
  local d=$STATE_DIR/certs
  mkdir -p "$d"
  new_ca "$d" ca sidecarset-local-ca
  new_cert "$d" ca apiserver "/CN=kube-apiserver" "$(
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature' \
      'extendedKeyUsage=serverAuth' \
      'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local'
  )"
  new_cert "$d" ca admin "/O=system:masters/CN=kubernetes-admin" "$(
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature' \
      'extendedKeyUsage=clientAuth'
  )"
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  if [[ $REAL_NODE == true ]]; then
    # The API server's identity towards kubelets (logs, exec, port-forward): the real node's
    # kubelet authenticates it by this certificate and asks the API server whether it may (RBAC:
    # system:kubelet-api-admin, bound by hack/node.sh up).
    new_cert "$d" ca apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client" "$(
      printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature' 'extendedKeyUsage=clientAuth'
    )"
  fi
}

write_kubeconfig() {
  local d=$STATE_DIR/certs
  cat >"$KUBECONFIG_FILE" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sidecarset-local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$d/ca.crt")
users:
- name: sidecarset-local-admin
  user:
    client-certificate-data: $(base64 -w0 "$d/admin.crt")
    client-key-data: $(base64 -w0 "$d/admin.key")
contexts:
- name: sidecarset-local
  context:
    cluster: sidecarset-local
    user: sidecarset-local-admin
current-context: sidecarset-local
EOF
  chmod 600 "$KUBECONFIG_FILE"
}

# record_env: binaries, ports and kubeconfig, for later commands and for demo.sh.
record_env() {
  local ports
  read -r -a ports <<<"$(free_ports 6)"
  cat >"$STATE_DIR/cluster.env" <<EOF
BIN_DIR=$(printf %q "$BIN_DIR")
KUBECONFIG_FILE=$(printf %q "$STATE_DIR/kubeconfig")
ETCD_PORT=${ports[0]}
ETCD_PEER_PORT=${ports[1]}
APISERVER_PORT=${ports[2]}
CONTROLLER_MANAGER_PORT=${ports[3]}
SCHEDULER_PORT=${ports[4]}
KWOK_PORT=${ports[5]}
EOF
  load_cluster_env
}

# STARTED lists what this `up` started, so a failure stops exactly those.
STARTED=()
on_up_exit() {
  local rc=$? i
  ((rc == 0)) && return
  if ((${#STARTED[@]} > 0)); then
    log "up failed or was interrupted; stopping what it started (logs stay in $STATE_DIR/logs)"
    for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do stop_bg "${STARTED[i]}" || true; done
    if [[ $REAL_NODE == true ]]; then "$REPO_ROOT/hack/node.sh" down || true; fi
  fi
  exit "$rc"
}

# launch NAME WHAT CHECK_ARGS... -- CMD...: start NAME, wait for CHECK, print one line.
launch() {
  local name=$1 what=$2 start check=()
  shift 2
  while [[ $1 != -- ]]; do check+=("$1"); shift; done
  shift
  start=$(now_us)
  start_bg "$name" "$@"
  STARTED+=("$name")
  wait_for "$name" "$TIMEOUT" "$name ready on $what" "${check[@]}" || exit 1
  log "$name ready on $what ($(since "$start"))"
}

etcd_healthy() { curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }

start_components() {
  local c=$STATE_DIR/certs k=$KUBECONFIG_FILE real_node_flags=()
  if [[ $REAL_NODE == true ]]; then
    # The API server calls kubelets with a client certificate of its own and checks their
    # serving certificates against the cluster CA (the real node's is signed by it).
    real_node_flags=(--kubelet-preferred-address-types=InternalIP --kubelet-certificate-authority="$c/ca.crt"
      --kubelet-client-certificate="$c/apiserver-kubelet-client.crt" --kubelet-client-key="$c/apiserver-kubelet-client.key")
  fi
  # etcd's largest recommended quota, 8 GiB (its default is 2): make bench-envelope's 150,000
  # pods and their writes come near the default.
  launch etcd "127.0.0.1:$ETCD_PORT" etcd_healthy -- \
    "$BIN_DIR/etcd" --name=local --data-dir="$STATE_DIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="local=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --quota-backend-bytes=8589934592

  # --endpoint-reconciler-type=none: otherwise the API server refuses a loopback advertise address.
  launch kube-apiserver "127.0.0.1:$APISERVER_PORT" apiserver_ready -- \
    "$BIN_DIR/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --secure-port="$APISERVER_PORT" --cert-dir="$c" \
    --tls-cert-file="$c/apiserver.crt" --tls-private-key-file="$c/apiserver.key" --client-ca-file="$c/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$c/sa.pub" --service-account-signing-key-file="$c/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --authorization-mode=Node,RBAC --allow-privileged=true \
    --enable-admission-plugins=ServiceAccount,LimitRanger,AlwaysPullImages,PodSecurity \
    --profiling="$APISERVER_PROFILING" "${real_node_flags[@]}"

  local grace_flags=()
  if [[ -n ${SIDECARSET_KWOK_NODE_LEASE_SECONDS:-} ]]; then
    grace_flags=(--node-monitor-grace-period="${NODE_LEASE_SECONDS}s")
  fi
  launch kube-controller-manager "127.0.0.1:$CONTROLLER_MANAGER_PORT" \
    http_ok -k "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz" -- \
    "$BIN_DIR/kube-controller-manager" --kubeconfig="$k" \
    --authentication-kubeconfig="$k" --authorization-kubeconfig="$k" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$CONTROLLER_MANAGER_PORT" \
    --root-ca-file="$c/ca.crt" --service-account-private-key-file="$c/sa.key" \
    --cluster-signing-cert-file="$c/ca.crt" --cluster-signing-key-file="$c/ca.key" --profiling=false "${grace_flags[@]}"

  launch kube-scheduler "127.0.0.1:$SCHEDULER_PORT" \
    http_ok -k "https://127.0.0.1:$SCHEDULER_PORT/readyz" -- \
    "$BIN_DIR/kube-scheduler" --kubeconfig="$k" \
    --authentication-kubeconfig="$k" --authorization-kubeconfig="$k" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --profiling=false

  # Pod IPs from a range of their own, apart from the service range.
  launch kwok "127.0.0.1:$KWOK_PORT" http_ok "http://127.0.0.1:$KWOK_PORT/healthz" -- \
    "$BIN_DIR/kwok" --kubeconfig="$k" --config="$BIN_DIR/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --config="$REPO_ROOT/hack/kwok/sidecar-update-stages.yaml" \
    --node-lease-duration-seconds="$NODE_LEASE_SECONDS" --server-address="127.0.0.1:$KWOK_PORT" --cidr=10.244.0.0/16
}

create_node() {
  local start
  start=$(now_us)
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE_NAME
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: $NODE_NAME
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    type: kwok
spec:
  taints:
  - key: kwok.x-k8s.io/node
    value: fake
    effect: NoSchedule
status:
  allocatable: {cpu: "1000", memory: 4Ti, pods: "20000"}
  capacity: {cpu: "1000", memory: 4Ti, pods: "20000"}
EOF
  node_ready() {
    [[ $(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
  }
  wait_for kwok "$TIMEOUT" "node $NODE_NAME Ready" node_ready || exit 1
  log "node $NODE_NAME Ready ($(since "$start"))"
  start=$(now_us)
  # Pods are admitted only once their namespace has a default ServiceAccount.
  wait_for kube-controller-manager "$TIMEOUT" "ServiceAccount default/default" \
    kubectl -n default get serviceaccount default || exit 1
  log "ServiceAccount default/default exists ($(since "$start"))"
}

cmd_up() {
  take_lock "$STATE_DIR.lock"
  if cluster_up; then
    log "already up: export KUBECONFIG=$KUBECONFIG_FILE"
    return
  fi
  if [[ -e $STATE_DIR ]]; then
    log "found a stopped or partial cluster in $STATE_DIR; restarting it from scratch"
    remove_state
  fi
  local start
  start=$(now_us)
  BIN_DIR=$("$REPO_ROOT/hack/controlplane-build.sh" all | tail -n 1)
  [[ -x $BIN_DIR/kube-apiserver && -f $BIN_DIR/kwok-stages.yaml ]] ||
    die "hack/controlplane-build.sh all gave $BIN_DIR, which lacks the binaries"
  mkdir -p "$STATE_DIR"/{certs,logs,pids,etcd}
  touch "$STATE_DIR/$STATE_MARKER"
  record_env
  gen_certs
  write_kubeconfig
  log "certificates and kubeconfig in $STATE_DIR ($(since "$start"))"
  trap on_up_exit EXIT
  trap 'exit 130' INT TERM
  start_components
  create_node
  if [[ $REAL_NODE == true ]]; then
    "$REPO_ROOT/hack/node.sh" up
  fi
  trap - EXIT INT TERM
  log "up in $(since "$start"): export KUBECONFIG=$KUBECONFIG_FILE"
}

# ---- down ----

# remove_state: stop every recorded process (operators and the webhook proxy first, then the
# cluster in reverse start order) and remove the state directory.
remove_state() {
  [[ -d $STATE_DIR ]] || return 0
  require_owned_state
  # The real node first: its containers, mounts and cgroups, which stopping its pid would leave.
  if [[ -e $STATE_DIR/node.env || -d $STATE_DIR/node ]]; then
    "$REPO_ROOT/hack/node.sh" down
  fi
  local f name i others=()
  for f in "$STATE_DIR"/pids/*.pid; do
    [[ -e $f ]] || continue
    name=$(basename "$f" .pid)
    [[ " ${CORE_COMPONENTS[*]} " == *" $name "* ]] || others+=("$name")
  done
  for name in "${others[@]}"; do stop_bg "$name"; done
  for ((i = ${#CORE_COMPONENTS[@]} - 1; i >= 0; i--)); do stop_bg "${CORE_COMPONENTS[i]}"; done
  rm -rf "$STATE_DIR"
}

cmd_down() {
  take_lock "$STATE_DIR.lock"
  if [[ ! -e $STATE_DIR ]]; then
    log "nothing to stop ($STATE_DIR does not exist)"
    return
  fi
  local start
  start=$(now_us)
  remove_state
  log "down in $(since "$start"); removed $STATE_DIR"
}

# ---- status, env ----

cmd_status() {
  if ! load_cluster_env; then
    echo "not up: $STATE_DIR/cluster.env does not exist"
    exit 1
  fi
  local f name pid state
  printf '%-26s %-8s %s\n' COMPONENT PID STATE
  for f in "$STATE_DIR"/pids/*.pid; do
    [[ -e $f ]] || continue
    name=$(basename "$f" .pid)
    pid=$(cat "$f")
    state=exited
    proc_alive "$pid" && state=running
    printf '%-26s %-8s %s\n' "$name" "$pid" "$state"
  done
  { grep _PORT= "$STATE_DIR"/*.env "$STATE_DIR"/operators/*.env 2>/dev/null || true; } | sed "s#^$STATE_DIR/#  #"
  if cluster_up; then
    echo "cluster up: export KUBECONFIG=$KUBECONFIG_FILE"
  else
    echo "cluster NOT up (a component exited or the API server is not ready)"
    exit 1
  fi
}

cmd_env() {
  if ! cluster_up; then log "warning: the cluster is not up (hack/cluster.sh up)"; fi
  echo "export KUBECONFIG=$STATE_DIR/kubeconfig"
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  kubectl)
    shift
    load_cluster_env || die "the cluster is not up (hack/cluster.sh up)"
    kubectl "$@"
    ;;
  *) usage ;;
esac
