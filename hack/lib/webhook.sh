# shellcheck shell=bash
# Webhook plumbing for an operator running as host processes next to hack/cluster.sh's cluster:
# a local CA and serving certificate, the manifests of config/default rewritten to call
# https://127.0.0.1:<port>, and a TCP proxy on that port spreading connections over the
# operator replicas. Sourced after common.sh, never run.

WEBHOOK_DIR=$STATE_DIR/webhook
# One line per replica: "NAME WEBHOOK_PORT HEALTH_PORT"; the proxy rereads it on every
# connection, so replicas come and go without restarting it.
WEBHOOK_BACKENDS=$WEBHOOK_DIR/backends
WEBHOOK_PROXY=webhook-proxy

# gen_webhook_certs: a CA (its certificate goes into caBundle) and a serving certificate for
# 127.0.0.1 that every replica shares. Kept across installs, so caBundle stays stable.
gen_webhook_certs() {
  [[ -f $WEBHOOK_DIR/tls.crt && -f $WEBHOOK_DIR/tls.key && -f $WEBHOOK_DIR/ca.crt ]] && return 0
  mkdir -p "$WEBHOOK_DIR"
  new_ca "$WEBHOOK_DIR" ca sidecarset-webhook-ca
  new_cert "$WEBHOOK_DIR" ca tls "/CN=sidecarset-webhook" "$(
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature' \
      'extendedKeyUsage=serverAuth' 'subjectAltName=IP:127.0.0.1,DNS:localhost'
  )"
}

# render_install_manifests URL_BASE: the JSON List `install` applies: the Namespace(s), CRD(s)
# and webhook configurations of config/default, each webhook's clientConfig.service turned into
# url=URL_BASE+path with caBundle=our CA (devtool install-manifests). Selectors, rules and
# everything else stay exactly as rendered.
render_install_manifests() {
  local url_base=$1 kustomize=$REPO_ROOT/bin/kustomize rendered
  [[ -x $kustomize ]] || die "$kustomize is missing: run make kustomize"
  rendered=$("$kustomize" build "$REPO_ROOT/config/default") || die "kustomize build config/default failed"
  devtool install-manifests "$url_base" "$WEBHOOK_DIR/ca.crt" <<<"$rendered"
}

# ensure_webhook_proxy: start the proxy on WEBHOOK_PORT (chosen once, kept in webhook.env)
# unless it runs; sets WEBHOOK_PORT.
ensure_webhook_proxy() {
  local start
  if [[ -f $STATE_DIR/webhook.env ]]; then
    # shellcheck disable=SC1091
    source "$STATE_DIR/webhook.env"
  else
    WEBHOOK_PORT=$(free_ports 1)
    echo "WEBHOOK_PORT=$WEBHOOK_PORT" >"$STATE_DIR/webhook.env"
  fi
  running "$WEBHOOK_PROXY" && return 0
  start=$(now_us)
  mkdir -p "$WEBHOOK_DIR"
  touch "$WEBHOOK_BACKENDS"
  # The proxy (devtool proxy) forwards each TCP connection to the next replica in round-robin
  # order, preferring replicas whose /readyz answers 200 and falling over when one refuses.
  local bin
  bin=$(devtool_bin) || exit 1
  start_bg "$WEBHOOK_PROXY" "$bin" proxy "$WEBHOOK_PORT" "$WEBHOOK_BACKENDS"
  wait_for "$WEBHOOK_PROXY" 10 "webhook proxy listening" bash -c "exec 3<>/dev/tcp/127.0.0.1/$WEBHOOK_PORT" ||
    die "the webhook proxy did not start"
  log "webhook proxy listening on 127.0.0.1:$WEBHOOK_PORT ($(since "$start"))"
}

# backend_set NAME WEBHOOK_PORT HEALTH_PORT / backend_remove NAME: edit the proxy's replica
# list atomically (write a new file, rename it over the old one).
backend_set() {
  mkdir -p "$WEBHOOK_DIR"
  { grep -v "^$1 " "$WEBHOOK_BACKENDS" 2>/dev/null || true; echo "$1 $2 $3"; } >"$WEBHOOK_BACKENDS.tmp"
  mv -f "$WEBHOOK_BACKENDS.tmp" "$WEBHOOK_BACKENDS"
}
backend_remove() {
  [[ -f $WEBHOOK_BACKENDS ]] || return 0
  { grep -v "^$1 " "$WEBHOOK_BACKENDS" || true; } >"$WEBHOOK_BACKENDS.tmp"
  mv -f "$WEBHOOK_BACKENDS.tmp" "$WEBHOOK_BACKENDS"
}
