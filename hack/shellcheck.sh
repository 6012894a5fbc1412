#!/usr/bin/env bash
# Runs shellcheck on the hack/ scripts. shellcheck is not a Go program, so it cannot come from
# the Go module proxy: it is taken from PATH, or installed from Debian's apt when it is missing
# and this runs as root on a Debian-like system (CI); anywhere else the message says how.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v shellcheck >/dev/null 2>&1; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "[shellcheck] not found; installing it with apt-get" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >&2
  else
    echo "[shellcheck] not found: install it (apt-get install shellcheck, brew install shellcheck, dnf install ShellCheck)" >&2
    exit 1
  fi
fi
shellcheck --version | sed -n 2p >&2
shellcheck -x hack/*.sh hack/lib/*.sh hack/realnode/*.sh .ci/run
