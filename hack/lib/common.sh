# shellcheck shell=bash
# Shared helpers for hack/cluster.sh and hack/demo.sh: the state directory, progress lines and
# timing, free loopback ports, background processes recorded by pid, and openssl certificates.
# Sourced, never run; the caller sets `set -euo pipefail` and LOG_PREFIX.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Everything a local cluster owns lives here; `hack/cluster.sh down` removes it.
STATE_DIR=$(realpath -m "${SIDECARSET_CLUSTER_DIR:-$REPO_ROOT/bin/cluster}")
# Written into a state directory we created, so that `down` never removes a directory it
# did not create (SIDECARSET_CLUSTER_DIR may point anywhere): see require_owned_state.
STATE_MARKER=.sidecarset-local-cluster
# The cluster's own processes, in start order; `down` stops everything else first (operators,
# the webhook proxy), then these in reverse.
CORE_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
LOG_TAIL_LINES=30

# Local servers must never be reached through a proxy from the environment: the API server
# calls the webhook on 127.0.0.1, the scripts poll 127.0.0.1.
export NO_PROXY=127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY} no_proxy=127.0.0.1,localhost${no_proxy:+,$no_proxy}

log() { printf '[%s] %s\n' "${LOG_PREFIX:-hack}" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Under `set -e` a failing command otherwise ends the script without a word: name it. (Only
# in the main shell: a failure inside $(...) is reported where the substitution fails.)
on_err() { ((BASH_SUBSHELL > 0)) || log "ERROR: \"$2\" failed (exit $1) at ${3##*/}:$4"; }
set -o errtrace
trap 'on_err $? "$BASH_COMMAND" "${BASH_SOURCE[0]}" "$LINENO"' ERR

# now_us prints the wall clock in microseconds; `since START` (START from now_us) prints the time
# elapsed since, in tenths of seconds, e.g. "1.3s".
now_us() { local t=${EPOCHREALTIME/./}; echo "$((10#$t))"; }
since() {
  local d=$((($(now_us) - $1) / 100000))
  echo "$((d / 10)).$((d % 10))s"
}

pid_file() { echo "$STATE_DIR/pids/$1.pid"; }
log_file() { echo "$STATE_DIR/logs/$1.log"; }

# proc_alive PID: the process runs, is not a zombie, and is one of ours (its command line names
# a file in the state directory), so a recycled pid is never mistaken for, or killed as, a
# component.
proc_alive() {
  local pid=$1 stat state
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  state=${stat##*) }
  state=${state%% *}
  [[ $state != Z && $state != X ]] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$STATE_DIR/"
}

# recorded_pid NAME prints the pid recorded for NAME, if any.
recorded_pid() {
  local f
  f=$(pid_file "$1")
  [[ -f $f ]] && cat "$f"
  return 0
}

# running NAME: NAME's recorded process is alive.
running() {
  local pid
  pid=$(recorded_pid "$1")
  [[ -n $pid ]] && proc_alive "$pid"
}

# start_bg NAME CMD...: run CMD in its own session (so ^C or a killed make does not take it
# down), detached from our stdio, appending to NAME's log; record its pid. Fd 9 (our lock)
# is closed in the child so a long-lived process never holds it.
start_bg() {
  local name=$1
  shift
  mkdir -p "$STATE_DIR/pids" "$STATE_DIR/logs"
  printf '\n===== %s starting %s\n' "$(date -u +%FT%TZ)" "$name" >>"$(log_file "$name")"
  setsid "$@" </dev/null >>"$(log_file "$name")" 2>&1 9>&- &
  echo "$!" >"$(pid_file "$name")"
}

# stop_bg NAME [SIGNAL]: send SIGNAL (default TERM) to NAME's recorded process, wait up to
# 10 s for it to exit, then KILL it. Only the recorded pid is signalled, and only if it is
# still ours.
stop_bg() {
  local name=$1 signal=${2:-TERM} pid start i
  pid=$(recorded_pid "$name")
  if [[ -n $pid ]] && proc_alive "$pid"; then
    start=$(now_us)
    kill -"$signal" "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      proc_alive "$pid" || break
      sleep 0.1
    done
    if proc_alive "$pid"; then
      log "$name (pid $pid) outlived $signal by 10s; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        proc_alive "$pid" || break
        sleep 0.1
      done
    fi
    proc_alive "$pid" && die "$name (pid $pid) did not exit"
    log "stopped $name (pid $pid$([[ $signal == TERM ]] || echo ", SIG$signal"), $(since "$start"))"
  fi
  rm -f "$(pid_file "$name")"
}

# show_log_tail NAME: the last lines NAME logged since its latest start, indented, on stderr;
# and, when the run logged more than that, its first error-looking line (a Go flag error
# comes first and is followed by pages of usage).
show_log_tail() {
  local f run first
  f=$(log_file "$1")
  run=$(awk '/^===== .* starting /{n = NR} END {print n + 1}' "$f" 2>/dev/null) || run=1
  if [[ ! -s $f ]] || (($(tail -n "+$run" "$f" | wc -l) == 0)); then
    log "$f is empty: $1 logged nothing"
    return
  fi
  if (($(tail -n "+$run" "$f" | wc -l) > LOG_TAIL_LINES)); then
    first=$(tail -n "+$run" "$f" | grep -m1 -iE 'error|invalid|unknown|not defined|fatal|panic' || true)
    [[ -z $first ]] || log "first error-looking line of this run: $first"
  fi
  log "last $LOG_TAIL_LINES lines of $f:"
  tail -n "+$run" "$f" | tail -n "$LOG_TAIL_LINES" | sed 's/^/    /' >&2
}

# devtool_bin: the path of bin/devtool (hack/devtool: free ports, manifest rewriting, JSON
# fields, the webhook proxy), built first when missing or older than its sources.
devtool_bin() {
  local bin=$REPO_ROOT/bin/devtool
  if [[ ! -x $bin || -n $(find "$REPO_ROOT/hack/devtool" "$REPO_ROOT/go.mod" -newer "$bin" -print -quit) ]]; then
    (cd "$REPO_ROOT" && go build -o "$bin" ./hack/devtool) || die "building hack/devtool failed"
  fi
  echo "$bin"
}

# devtool ARGS...: run bin/devtool.
devtool() {
  local bin
  bin=$(devtool_bin) || exit 1
  "$bin" "$@"
}

# free_ports N: N distinct loopback ports, free now and recorded for no component of this state
# directory (a recorded port may be free for a moment while its process restarts).
free_ports() {
  devtool free-ports "$1" "$STATE_DIR"/*.env "$STATE_DIR"/operators/*.env
}

# still_running NAME: NAME's process is alive, or turns out to be within a second. A process
# reads as not running for an instant while it forks and execs (its /proc cmdline is not yet
# its own, or empty; seen in CI with olm-catalog, started through setsid and env).
still_running() {
  local i
  for ((i = 0; i < 5; i++)); do
    running "$1" && return 0
    sleep 0.2
  done
  return 1
}

# wait_for NAME TIMEOUT_S WHAT CHECK...: poll CHECK every 0.1 s until it succeeds. Fails
# (returns 1, with NAME's log tail) as soon as NAME's process exits, or after TIMEOUT_S.
# NAME may be "-" for a check that no single process of ours backs.
wait_for() {
  local name=$1 timeout=$2 what=$3 deadline
  shift 3
  deadline=$(($(now_us) + timeout * 1000000))
  until "$@" >/dev/null 2>&1; do
    if [[ $name != - ]] && ! still_running "$name"; then
      log "FAILED: waiting for $what: $name exited"
      show_log_tail "$name"
      return 1
    fi
    if (($(now_us) > deadline)); then
      log "FAILED: waiting for $what: timed out after ${timeout}s; the last check said:"
      { "$@" 2>&1 || true; } | tail -n 5 | sed 's/^/    /' >&2
      [[ $name == - ]] || show_log_tail "$name"
      return 1
    fi
    sleep 0.1
  done
}

# print_usage SCRIPT: SCRIPT's header comment, on stderr.
print_usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$1" >&2; }

# http_ok [CURL ARGS...] URL: URL answers 2xx.
http_ok() { curl -fsS --max-time 2 -o /dev/null "$@"; }

# ---- certificates (openssl) ----

# TLS keys are ECDSA P-256: as good as RSA here and generated in milliseconds rather than
# half a second each on a slow machine.
TLS_KEY_OPTS=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1)

# new_ca DIR NAME CN: DIR/NAME.{crt,key}, a self-signed CA valid for 10 years.
new_ca() {
  openssl req -x509 "${TLS_KEY_OPTS[@]}" -nodes -days 3650 -subj "/CN=$3" \
    -keyout "$1/$2.key" -out "$1/$2.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    2>/dev/null
}

# new_cert DIR CA NAME SUBJECT EXTENSIONS: DIR/NAME.{crt,key} signed by DIR/CA.{crt,key}.
new_cert() {
  local dir=$1 ca=$2 name=$3 subj=$4 ext=$5
  openssl req -new "${TLS_KEY_OPTS[@]}" -nodes -subj "$subj" -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.crt" -CAkey "$dir/$ca.key" \
    -set_serial "0x$(openssl rand -hex 12)" -days 365 -out "$dir/$name.crt" \
    -extfile <(printf '%s\n' "$ext") 2>/dev/null
  rm -f "$dir/$name.csr"
}

# ---- state ----

# require_owned_state: die unless STATE_DIR holds STATE_MARKER, i.e. hack/cluster.sh up created
# it. Called before anything removes or stops what the state directory records (cluster.sh
# down, node.sh down and up): SIDECARSET_CLUSTER_DIR may name a directory of someone else.
require_owned_state() {
  [[ -f $STATE_DIR/$STATE_MARKER ]] ||
    die "$STATE_DIR has no $STATE_MARKER: not a directory hack/cluster.sh created; not touching it"
}

# load_cluster_env: ports, binaries and kubeconfig of the cluster recorded by `up`.
load_cluster_env() {
  [[ -f $STATE_DIR/cluster.env ]] || return 1
  # shellcheck disable=SC1091
  source "$STATE_DIR/cluster.env"
}

kubectl() { "$BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

apiserver_ready() {
  http_ok --cacert "$STATE_DIR/certs/ca.crt" --cert "$STATE_DIR/certs/admin.crt" \
    --key "$STATE_DIR/certs/admin.key" "https://127.0.0.1:$APISERVER_PORT/readyz"
}

# cluster_up: every core component runs and the API server is ready.
cluster_up() {
  load_cluster_env || return 1
  local c
  for c in "${CORE_COMPONENTS[@]}"; do running "$c" || return 1; done
  apiserver_ready
}

# take_lock FILE: serialise `up`/`down` of one state directory across processes. The lock files
# live beside the state directory: inside it, `down` would remove one while it is held.
take_lock() {
  mkdir -p "$(dirname "$1")"
  exec 9>"$1"
  flock -w 300 9 || die "another process holds $1 (waited 300s)"
}
