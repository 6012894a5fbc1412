#!/usr/bin/env bash
# Runs containerd and the kubelet of the local cluster's real node inside a private mount
# namespace (hack/node.sh starts it under `unshare --mount --propagation slave`), so that nothing
# they do reaches the host:
#   - the kernel settings the kubelet rewrites (vm.overcommit_memory, kernel.panic,
#     kernel.panic_on_oops) and checks are scratch copies bind-mounted over /proc/sys;
#   - /run (containerd's sockets and shims, runc's state) is a fresh tmpfs, and /var/log (where
#     the kubelet links container logs) a scratch directory;
#   - every mount a container gets vanishes with the namespace.
# Everything it starts lives in the cgroup NODE_DIR/cgroup names (the node's own, in the pids
# hierarchy; the kubelet puts the pods below it too, as its cgroupRoot), so `hack/node.sh down`
# can stop every process left over, whatever happened to this script, and nothing else.
#
#   node-ns.sh NODE_DIR CONTAINERD_BIN_DIR KUBELET_BIN KUBELET_ARGS...
#
# On SIGTERM it stops the kubelet, kills every container, then stops containerd.
set -euo pipefail
node_dir=$1 tools=$2 kubelet=$3
shift 3

log() { printf '[node-ns] %s\n' "$*" >&2; }

# Join the node's cgroup first: everything started from here on is in it.
echo "$$" >"$(cat "$node_dir/cgroup")/cgroup.procs"

for f in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops \
  kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
  copy="$node_dir/sysctl/${f//\//.}"
  mkdir -p "$node_dir/sysctl"
  cat "/proc/sys/$f" >"$copy"
  mount --bind "$copy" "/proc/sys/$f"
done
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p "$node_dir/varlog"
mount --bind "$node_dir/varlog" /var/log

export PATH="$tools:$PATH"
containerd --config "$node_dir/containerd.toml" >>"$node_dir/containerd.log" 2>&1 &
containerd_pid=$!
for ((i = 0; i < 300; i++)); do
  [[ -S /run/containerd/containerd.sock ]] && break
  kill -0 "$containerd_pid" 2>/dev/null || { log "containerd exited; see $node_dir/containerd.log"; exit 1; }
  sleep 0.1
done
[[ -S /run/containerd/containerd.sock ]] || { log "containerd made no socket in 30s"; exit 1; }
log "containerd ready (pid $containerd_pid)"

"$kubelet" "$@" >>"$node_dir/kubelet.log" 2>&1 &
kubelet_pid=$!
log "kubelet started (pid $kubelet_pid)"

stopping=false
stop() {
  $stopping && return
  stopping=true
  log "stopping the kubelet"
  kill -TERM "$kubelet_pid" 2>/dev/null || true
  wait "$kubelet_pid" 2>/dev/null || true
  local ctr=(ctr --address /run/containerd/containerd.sock -n k8s.io) t
  for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
    "${ctr[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
  done
  sleep 0.5
  for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
    "${ctr[@]}" tasks delete -f "$t" >/dev/null 2>&1 || true
  done
  for t in $("${ctr[@]}" containers ls -q 2>/dev/null); do
    "${ctr[@]}" containers delete "$t" >/dev/null 2>&1 || true
  done
  log "containers removed; stopping containerd"
  kill -TERM "$containerd_pid" 2>/dev/null || true
  wait "$containerd_pid" 2>/dev/null || true
}
trap 'stop; exit 0' TERM INT

# Either daemon exiting on its own ends the node.
rc=0
wait -n "$containerd_pid" "$kubelet_pid" || rc=$?
log "a node daemon exited (status $rc); stopping the other"
stop
exit 1
