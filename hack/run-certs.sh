#!/usr/bin/env bash
# Creates a CA and a webhook serving certificate for 127.0.0.1 in DIR (once), for running the
# manager on this host: DIR/tls.crt, DIR/tls.key and DIR/ca.crt (the caBundle to register).
set -euo pipefail
dir=${1:?usage: $0 DIR}
[[ -s $dir/tls.crt && -s $dir/tls.key && -s $dir/ca.crt ]] && exit 0
mkdir -p "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=sidecarset-local-ca" \
  -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$dir/ext.cnf"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 365 \
  -extfile "$dir/ext.cnf" -out "$dir/tls.crt" 2>/dev/null
rm -f "$dir/tls.csr" "$dir/ext.cnf" "$dir/ca.srl"
echo "[certs] webhook serving certificate for 127.0.0.1 in $dir (CA: $dir/ca.crt)"
