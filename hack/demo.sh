#!/usr/bin/env bash
# The operator, end to end, on hack/cluster.sh's local cluster: the manager runs as host
# processes, the API server calls its webhooks through a loopback TCP proxy, kwok plays the
# kubelet.
#
#   hack/demo.sh up         cluster up, build, install, start operator-0, apply config/samples
#                           and a 3-replica Deployment, wait until both SidecarSets count
#                           3 matched/updated/ready, show what was injected (reuses what runs)
#   hack/demo.sh down       stop the operators, the proxy and the cluster; remove the state
#   hack/demo.sh build      go build the manager into bin/manager
#   hack/demo.sh install    the CRD, the sidecarset-system Namespace and the webhook
#                           configurations (calling https://127.0.0.1:<proxy port>), CRD Established
#   hack/demo.sh operator-start [NAME] [MANAGER FLAGS...]
#                           start replica NAME (default operator-0) and wait for its /readyz;
#                           SIDECARSET_OPERATOR_WAIT=0 skips the wait, POD_NAMESPACE defaults to
#                           sidecarset-system, SIDECARSET_OPERATOR_KUBECONFIG replaces the
#                           cluster's kubeconfig (a test's proxy in front of the API server)
#   hack/demo.sh operator-stop [NAME|--all] [SIGNAL] [keep]
#                           stop replica NAME (default operator-0): SIGNAL (default TERM), KILL
#                           after 10 s; keep leaves it in the webhook proxy, as a dead pod stays
#                           among a Service's endpoints until it is seen not ready
#   hack/demo.sh status     every recorded process and port (hack/cluster.sh status)
#   hack/demo.sh env        print `export KUBECONFIG=...`
#
# State: ${SIDECARSET_CLUSTER_DIR:-<repo>/bin/cluster}, shared with hack/cluster.sh; a replica's
# log is logs/NAME.log, its pid pids/NAME.pid, its ports operators/NAME.env.
# Timeouts in seconds: SIDECARSET_OPERATOR_TIMEOUT (a replica's /readyz, default 60),
# SIDECARSET_DEMO_TIMEOUT (SidecarSets converging, default 120). operator-start runs
# SIDECARSET_MANAGER in place of bin/manager when set (the upgrade test runs a previous release).
# bin/manager drains its webhook server for SIDECARSET_WEBHOOK_DRAIN (default 1s, five in
# production) when stopped: long enough for the few connections the API server keeps to it.
set -euo pipefail
LOG_PREFIX=demo
# shellcheck source=hack/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=hack/lib/webhook.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/webhook.sh"

CLUSTER=$REPO_ROOT/hack/cluster.sh
MANAGER=${SIDECARSET_MANAGER:-$REPO_ROOT/bin/manager}
# A previous release may not know the drain flag.
MANAGER_FLAGS=()
[[ -n ${SIDECARSET_MANAGER:-} ]] || MANAGER_FLAGS=(--webhook-drain-duration="${SIDECARSET_WEBHOOK_DRAIN:-1s}")
OPERATOR_NAMESPACE=sidecarset-system
OPERATOR_TIMEOUT=${SIDECARSET_OPERATOR_TIMEOUT:-60}
DEMO_TIMEOUT=${SIDECARSET_DEMO_TIMEOUT:-120}
DEMO_NAMESPACE=demo
DEMO_REPLICAS=3
DEMO_SETS=(log-agent proxy)

usage() {
  print_usage "${BASH_SOURCE[0]}"
  exit 2
}

require_cluster() {
  cluster_up || die "the cluster is not up: run hack/cluster.sh up (or hack/demo.sh up)"
}

# ---- build, install ----

cmd_build() {
  local start
  start=$(now_us)
  # The same flags as `make build`, so both share Go's build cache.
  (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/manager .) ||
    die "go build of the manager failed"
  log "built bin/manager ($(since "$start"))"
}

cmd_install() {
  local start manifests crds
  start=$(now_us)
  require_cluster
  gen_webhook_certs
  ensure_webhook_proxy
  manifests=$(render_install_manifests "https://127.0.0.1:$WEBHOOK_PORT")
  kubectl apply --server-side --force-conflicts --field-manager=sidecarset-local -f - <<<"$manifests" >/dev/null
  crds=$(devtool names CustomResourceDefinition crd <<<"$manifests")
  # kubectl wait fails at once while a new CRD has no conditions at all: poll instead.
  crds_established() {
    local c
    for c in $crds; do
      [[ $(kubectl get "$c" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}') == True ]] || return 1
    done
  }
  wait_for - 60 "the CRDs to be Established" crds_established || die "the CRDs were not Established"
  log "installed the CRD and webhooks calling https://127.0.0.1:$WEBHOOK_PORT ($(since "$start"))"
}

# ---- operator replicas ----

manager_sha() { sha256sum "$MANAGER" | cut -d' ' -f1; }

# restart_if_rebuilt NAME: stop replica NAME if it runs a manager binary other than bin/manager,
# so that `up` after a code change runs the new code.
restart_if_rebuilt() {
  local f=$STATE_DIR/operators/$1.env
  running "$1" && [[ -f $f ]] || return 0
  if [[ $(sed -n 's/^OPERATOR_MANAGER_SHA256=//p' "$f") != "$(manager_sha)" ]]; then
    log "bin/manager changed since $1 started; restarting $1"
    cmd_operator_stop "$1"
  fi
}

check_name() {
  [[ $1 =~ ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ ]] || die "replica name '$1' is not a DNS label"
  [[ " ${CORE_COMPONENTS[*]} $WEBHOOK_PROXY " != *" $1 "* ]] || die "replica name '$1' is reserved"
}

# cmd_operator_start [NAME] [FLAGS...]: one manager process with its own webhook and health
# ports, registered with the webhook proxy. Do not pass --webhook-port,
# --health-probe-bind-address, --webhook-cert-path or --kubeconfig: they are set here.
cmd_operator_start() {
  local name=${1:-operator-0} start wp hp
  (($# > 0)) && shift
  check_name "$name"
  require_cluster
  [[ -f $STATE_DIR/webhook.env && -f $WEBHOOK_DIR/tls.crt ]] || die "not installed: run hack/demo.sh install"
  [[ -x $MANAGER ]] || die "$MANAGER is missing: run hack/demo.sh build"
  ensure_webhook_proxy
  if running "$name"; then
    log "$name already runs (pid $(recorded_pid "$name"))"
    return
  fi
  start=$(now_us)
  read -r wp hp <<<"$(free_ports 2)"
  mkdir -p "$STATE_DIR/operators"
  printf 'OPERATOR_WEBHOOK_PORT=%s\nOPERATOR_HEALTH_PORT=%s\nOPERATOR_MANAGER_SHA256=%s\n' \
    "$wp" "$hp" "$(manager_sha)" >"$STATE_DIR/operators/$name.env"
  start_bg "$name" env POD_NAMESPACE="${POD_NAMESPACE:-$OPERATOR_NAMESPACE}" POD_NAME="$name" "$MANAGER" \
    --kubeconfig="${SIDECARSET_OPERATOR_KUBECONFIG:-$KUBECONFIG_FILE}" --metrics-bind-address=0 --health-probe-bind-address="127.0.0.1:$hp" \
    --webhook-cert-path="$WEBHOOK_DIR" --webhook-host=127.0.0.1 --webhook-port="$wp" "${MANAGER_FLAGS[@]}" "$@"
  backend_set "$name" "$wp" "$hp"
  local state=started
  if [[ ${SIDECARSET_OPERATOR_WAIT:-1} != 0 ]]; then
    if ! wait_for "$name" "$OPERATOR_TIMEOUT" "$name /readyz" http_ok "http://127.0.0.1:$hp/readyz"; then
      cmd_operator_stop "$name"
      exit 1
    fi
    state=ready
  fi
  log "$name $state: pid $(recorded_pid "$name"), webhook 127.0.0.1:$wp (behind 127.0.0.1:$WEBHOOK_PORT)," \
    "health 127.0.0.1:$hp, log $(log_file "$name") ($(since "$start"))"
}

# cmd_operator_stop [NAME|--all] [SIGNAL] [keep]: take the replica out of the proxy, then stop it.
# With keep, the proxy keeps it, as a Service keeps a killed pod's endpoint until the pod is
# seen not ready (the proxy skips a replica whose /readyz fails, and falls over when one refuses);
# a later operator-stop NAME takes it out.
cmd_operator_stop() {
  local target=${1:-operator-0} signal=${2:-TERM} keep=${3:-} names=() f name
  [[ -z $keep || $keep == keep ]] || die "operator-stop: the third argument may only be keep; got $keep"
  if [[ $target == --all ]]; then
    for f in "$STATE_DIR"/operators/*.env; do
      [[ -e $f ]] && names+=("$(basename "$f" .env)")
    done
  else
    check_name "$target"
    names=("$target")
  fi
  for name in "${names[@]}"; do
    running "$name" || log "$name is not running"
    [[ $keep == keep ]] || backend_remove "$name"
    stop_bg "$name" "$signal"
    [[ $keep == keep ]] || rm -f "$STATE_DIR/operators/$name.env"
  done
}

# ---- demo ----

demo_workload() {
  cat <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $DEMO_NAMESPACE
  labels:
    mesh: enabled
EOF
}

# pod_spec INDENT: the app's pod spec, shared by the Deployment and the plain pod.
pod_spec() {
  sed "s/^/$1/" <<'EOF'
containers:
- name: app
  image: docker.io/library/nginx:1.27
  env:
  - name: APP_NAME
    value: web
  ports:
  - name: http
    containerPort: 80
  volumeMounts:
  - name: logs
    mountPath: /var/log/nginx
volumes:
- name: logs
  emptyDir: {}
nodeSelector:
  type: kwok
tolerations:
- key: kwok.x-k8s.io/node
  operator: Equal
  value: fake
  effect: NoSchedule
EOF
}

demo_deployment() {
  cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: $DEMO_NAMESPACE
spec:
  replicas: $DEMO_REPLICAS
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
        logging: enabled
        sidecarset.io/inject: "true"
    spec:
$(pod_spec '      ')
EOF
}

# The same pod without the opt-in label (and outside the Deployment's selector): both
# SidecarSets select it, but the API server never calls the webhook for it.
demo_plain_pod() {
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: web-plain
  namespace: $DEMO_NAMESPACE
  labels:
    app: web-plain
    logging: enabled
spec:
$(pod_spec '  ')
EOF
}

set_counts() {
  kubectl get sidecarset "$1" -o jsonpath='{.status.matchedPods}/{.status.updatedPods}/{.status.readyPods}'
}

# wait_for_sets: until every demo SidecarSet counts DEMO_REPLICAS matched, updated and ready.
wait_for_sets() {
  local want="$DEMO_REPLICAS/$DEMO_REPLICAS/$DEMO_REPLICAS" deadline next_print=0 s counts line done_
  deadline=$(($(now_us) + DEMO_TIMEOUT * 1000000))
  while :; do
    line="" done_=1
    for s in "${DEMO_SETS[@]}"; do
      counts=$(set_counts "$s" 2>/dev/null) || counts="?"
      [[ $counts == "$want" ]] || done_=0
      line+=" $s ${counts:-//}"
    done
    ((done_)) && break
    if (($(now_us) > deadline)); then
      log "FAILED: SidecarSets did not reach $want (matched/updated/ready) within ${DEMO_TIMEOUT}s:$line"
      kubectl -n "$DEMO_NAMESPACE" get pods -o wide >&2 || true
      show_log_tail operator-0
      return 1
    fi
    if (($(now_us) > next_print)); then
      log "waiting for SidecarSets (matched/updated/ready):$line"
      next_print=$(($(now_us) + 2000000))
    fi
    sleep 0.2
  done
}

# containers_of POD: "kind name image" rows, init containers first.
containers_of() {
  kubectl -n "$DEMO_NAMESPACE" get pod "$1" -o jsonpath='{range .spec.initContainers[*]}init-container {.name} {.image}{"\n"}{end}{range .spec.containers[*]}container {.name} {.image}{"\n"}{end}'
}

show_result() {
  local pod rows plain
  echo
  kubectl get sidecarsets
  pod=$(kubectl -n "$DEMO_NAMESPACE" get pods -l app=web -o jsonpath='{.items[0].metadata.name}')
  rows=$(containers_of "$pod")
  echo
  echo "Pod $DEMO_NAMESPACE/$pod (labelled sidecarset.io/inject=true):"
  column -t <<<"$rows" | sed 's/^/  /'
  if ! grep -q '^init-container proxy ' <<<"$rows" || ! grep -q '^container log-agent ' <<<"$rows"; then
    die "pod $pod lacks the proxy init container or the log-agent container"
  fi

  kubectl apply -f - >/dev/null <<<"$(demo_plain_pod)"
  plain=$(containers_of web-plain)
  echo
  echo "Pod $DEMO_NAMESPACE/web-plain (same spec, no sidecarset.io/inject label):"
  column -t <<<"$plain" | sed 's/^/  /'
  [[ $plain == "container app "* && $(wc -l <<<"$plain") == 1 ]] || die "pod web-plain was changed"
  echo "  only its own container: the API server calls the injector only for opted-in pods"
}


# show_rollout: update the log-agent sidecar's image in place on the running pods (a rolling
# update, maxUnavailable 1; kwok plays the kubelet, hack/kwok) and show the same pods with the
# new image and one restart of that container.
show_rollout() {
  local image=docker.io/fluent/fluent-bit:3.2.11 start uids_before uids_after rolled
  start=$(now_us)
  uids_before=$(kubectl -n "$DEMO_NAMESPACE" get pods -l app=web -o jsonpath='{.items[*].metadata.uid}')
  kubectl patch sidecarset log-agent --type=json -p "[
    {\"op\": \"add\", \"path\": \"/spec/updateStrategy\", \"value\": {\"type\": \"RollingUpdate\", \"maxUnavailable\": 1}},
    {\"op\": \"replace\", \"path\": \"/spec/containers/0/image\", \"value\": \"$image\"}]" >/dev/null
  rolled() {
    [[ $(kubectl get sidecarset log-agent -o jsonpath='{.status.conditions[?(@.type=="RollingUpdate")].reason}/{.status.updatedReadyPods}') == "Complete/$DEMO_REPLICAS" ]]
  }
  wait_for operator-0 "$DEMO_TIMEOUT" "the log-agent rollout to complete" rolled ||
    die "the rollout did not complete: $(kubectl get sidecarset log-agent -o jsonpath='{.status.conditions[?(@.type=="RollingUpdate")].message}')"
  uids_after=$(kubectl -n "$DEMO_NAMESPACE" get pods -l app=web -o jsonpath='{.items[*].metadata.uid}')
  echo
  echo "Rolling update of the log-agent sidecar to $image, in place ($(since "$start")):"
  rolled=$(kubectl -n "$DEMO_NAMESPACE" get pods -l app=web -o jsonpath='{range .items[*]}{.metadata.name} {.spec.containers[?(@.name=="log-agent")].image} restarts={.status.containerStatuses[?(@.name=="log-agent")].restartCount}{"\n"}{end}')
  column -t <<<"$rolled" | sed 's/^/  /'
  [[ $uids_before == "$uids_after" ]] || die "the rollout replaced pods instead of updating them in place"
  [[ $(grep -c " $image " <<<"$rolled") == "$DEMO_REPLICAS" ]] || die "not every pod runs $image"
  echo "  same pods (UIDs unchanged), only the log-agent container restarted; kubectl get sidecarset log-agent shows the RollingUpdate condition"
}
cmd_up() {
  take_lock "$STATE_DIR.demo.lock"
  local t0 t phases=()
  t0=$(now_us)
  t=$(now_us); "$CLUSTER" up; phases+=("cluster $(since "$t")")
  load_cluster_env
  t=$(now_us); cmd_build; phases+=("build $(since "$t")")
  t=$(now_us); cmd_install; phases+=("install $(since "$t")")
  t=$(now_us)
  restart_if_rebuilt operator-0
  POD_NAMESPACE=$OPERATOR_NAMESPACE cmd_operator_start operator-0 \
    --leader-elect --leader-election-namespace "$OPERATOR_NAMESPACE"
  phases+=("operator $(since "$t")")

  t=$(now_us)
  kubectl apply -k "$REPO_ROOT/config/samples" >/dev/null
  kubectl apply -f - >/dev/null <<<"$(demo_workload)"
  # Pods are admitted only once their namespace has a default ServiceAccount.
  wait_for kube-controller-manager 30 "ServiceAccount $DEMO_NAMESPACE/default" \
    kubectl -n "$DEMO_NAMESPACE" get serviceaccount default || exit 1
  kubectl apply -f - >/dev/null <<<"$(demo_deployment)"
  log "applied config/samples and Deployment $DEMO_NAMESPACE/web ($(since "$t"))"
  phases+=("apply $(since "$t")")

  t=$(now_us)
  wait_for_sets || die "the demo did not converge; inspect it with: $("$CLUSTER" env 2>/dev/null); tear it down with make demo-down"
  log "both SidecarSets count $DEMO_REPLICAS matched, updated and ready ($(since "$t"))"
  phases+=("converge $(since "$t")")
  show_result
  t=$(now_us)
  show_rollout
  phases+=("rollout $(since "$t")")

  echo
  echo "Use it:"
  echo "  export KUBECONFIG=$KUBECONFIG_FILE"
  command -v kubectl >/dev/null 2>&1 || echo "  export PATH=$BIN_DIR:\$PATH   # kubectl, built with the control plane"
  echo "  kubectl get pods -n $DEMO_NAMESPACE -o custom-columns=NAME:.metadata.name,INIT:.spec.initContainers[*].name,CONTAINERS:.spec.containers[*].name"
  echo "  operator log: $(log_file operator-0)"
  echo "Tear it down: make demo-down (or hack/demo.sh down)"
  echo
  local summary
  summary=$(printf '%s, ' "${phases[@]}")
  log "demo up in $(since "$t0") (${summary%, })"
}

cmd_down() {
  take_lock "$STATE_DIR.demo.lock"
  if [[ -d $STATE_DIR/operators ]]; then cmd_operator_stop --all; fi
  "$CLUSTER" down
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  build) cmd_build ;;
  install)
    load_cluster_env || die "the cluster is not up: run hack/cluster.sh up"
    cmd_install
    ;;
  operator-start)
    shift
    load_cluster_env || die "the cluster is not up: run hack/cluster.sh up"
    cmd_operator_start "$@"
    ;;
  operator-stop)
    shift
    cmd_operator_stop "$@"
    ;;
  status) exec "$CLUSTER" status ;;
  env) exec "$CLUSTER" env ;;
  *) usage ;;
esac
