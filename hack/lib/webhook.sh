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

# The Python half of render_install_manifests. Modes:
#   select            stdin: kustomize YAML; stdout: the documents we install, still YAML
#   rewrite yaml|json URL_BASE CA_FILE
#                     stdin: those documents (YAML, or JSON objects one after another as
#                     `kubectl create --dry-run=client -o json` prints them); stdout: a JSON List
#                     of the Namespace(s), CRD(s) and webhook configurations, each webhook's
#                     clientConfig.service turned into url=URL_BASE+path with caBundle=CA.
# Selectors, rules and everything else stay exactly as rendered.
# shellcheck disable=SC2016
MANIFESTS_PY='
import base64, json, re, sys

KINDS = ["Namespace", "CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
WEBHOOK_KINDS = KINDS[2:]

def fail(msg):
    sys.exit("render install manifests: " + msg)

def select(text):
    docs = re.split(r"(?m)^---[ \t]*\n", text)
    pattern = re.compile(r"(?m)^kind:[ \t]*(%s)[ \t]*$" % "|".join(KINDS))
    sys.stdout.write("---\n".join(d for d in docs if pattern.search(d)))

def load(fmt, text):
    if fmt == "yaml":
        import yaml
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml, when built in, is 3x faster
        return [d for d in yaml.load_all(text, Loader=loader) if d]
    objs, dec, i = [], json.JSONDecoder(), 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return objs
        obj, i = dec.raw_decode(text, i)
        objs.extend(obj.get("items", []) if obj.get("kind") == "List" else [obj])

def rewrite_webhooks(obj, url_base, ca):
    meta = obj["metadata"]
    ann = meta.get("annotations") or {}
    ann.pop("cert-manager.io/inject-ca-from", None)
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    for w in obj.get("webhooks") or []:
        svc = (w.get("clientConfig") or {}).get("service")
        if not svc:
            fail("%s %s: webhook %s has no clientConfig.service to rewrite" % (obj["kind"], meta["name"], w.get("name")))
        w["clientConfig"] = {"url": url_base + (svc.get("path") or "/"), "caBundle": ca}

def rewrite(fmt, url_base, ca_file):
    with open(ca_file, "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    objs = [o for o in load(fmt, sys.stdin.read()) if o.get("kind") in KINDS]
    for kind in KINDS:
        if not any(o["kind"] == kind for o in objs):
            fail("no %s in the rendered manifests" % kind)
    for o in objs:
        if o["kind"] in WEBHOOK_KINDS:
            rewrite_webhooks(o, url_base, ca)
    objs.sort(key=lambda o: KINDS.index(o["kind"]))
    json.dump({"apiVersion": "v1", "kind": "List", "items": objs}, sys.stdout)

if sys.argv[1] == "select":
    select(sys.stdin.read())
else:
    rewrite(sys.argv[2], sys.argv[3], sys.argv[4])
'

# render_install_manifests URL_BASE: the JSON List `install` applies. PyYAML parses when it is
# there (SIDECARSET_NO_PYYAML=1 forces the other way); otherwise kubectl turns the selected
# documents into JSON, which needs the API server for its type mapping.
render_install_manifests() {
  local url_base=$1 kustomize=$REPO_ROOT/bin/kustomize rendered
  [[ -x $kustomize ]] || die "$kustomize is missing: run make kustomize"
  rendered=$("$kustomize" build "$REPO_ROOT/config/default") || die "kustomize build config/default failed"
  if [[ -z ${SIDECARSET_NO_PYYAML:-} ]] && python3 -c 'import yaml' 2>/dev/null; then
    python3 -c "$MANIFESTS_PY" rewrite yaml "$url_base" "$WEBHOOK_DIR/ca.crt" <<<"$rendered"
  else
    python3 -c "$MANIFESTS_PY" select <<<"$rendered" | kubectl create --dry-run=client -o json -f - |
      python3 -c "$MANIFESTS_PY" rewrite json "$url_base" "$WEBHOOK_DIR/ca.crt"
  fi
}

# The webhook proxy: the registered webhook URL points at it; it forwards each TCP connection
# (TLS passes through untouched; the replicas hold the certificate) to the next replica in
# round-robin order, preferring replicas whose /readyz answers 200 and falling over to the
# next one when a connection is refused. Python standard library only.
WEBHOOK_PROXY_PY='
import asyncio, itertools, signal, sys, time

listen_port, backends_file = int(sys.argv[1]), sys.argv[2]
ready = {}
turn = itertools.count()

def say(msg):
    print(time.strftime("%Y-%m-%dT%H:%M:%S"), msg, flush=True)

def backends():
    try:
        with open(backends_file) as f:
            rows = [line.split() for line in f]
    except FileNotFoundError:
        return []
    return [(r[0], int(r[1]), int(r[2])) for r in rows if len(r) == 3]

async def probe(health_port):
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", health_port), 1)
        try:
            w.write(b"GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            status = await asyncio.wait_for(r.readline(), 1)
        finally:
            w.close()
        return status.split()[1:2] == [b"200"]
    except (OSError, asyncio.TimeoutError):
        return False

async def prober():
    while True:
        bs = backends()
        results = await asyncio.gather(*(probe(b[2]) for b in bs))
        now = {b[0]: ok for b, ok in zip(bs, results)}
        for name, ok in now.items():
            if ready.get(name) != ok:
                say("%s %s" % (name, "ready" if ok else "not ready"))
        ready.clear()
        ready.update(now)
        await asyncio.sleep(0.5)

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()

async def handle(client_r, client_w):
    bs = backends()
    if bs:
        n = next(turn) % len(bs)
        bs = bs[n:] + bs[:n]
    for name, port, _ in [b for b in bs if ready.get(b[0])] + [b for b in bs if not ready.get(b[0])]:
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1)
            break
        except (OSError, asyncio.TimeoutError):
            say("%s: connection to 127.0.0.1:%d failed; trying the next replica" % (name, port))
    else:
        say("no replica accepted a connection" if bs else "no replica registered; closing the connection")
        client_w.close()
        return
    await asyncio.gather(pipe(client_r, w), pipe(r, client_w))

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    probing = asyncio.create_task(prober())
    say("listening on 127.0.0.1:%d, replicas from %s" % (listen_port, backends_file))
    async with server:
        await stop.wait()
    probing.cancel()

asyncio.run(main())
'

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
  printf '%s' "$WEBHOOK_PROXY_PY" >"$WEBHOOK_DIR/proxy.py"
  start_bg "$WEBHOOK_PROXY" python3 -u "$WEBHOOK_DIR/proxy.py" "$WEBHOOK_PORT" "$WEBHOOK_BACKENDS"
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
