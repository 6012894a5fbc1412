#!/usr/bin/env bash
# Helm post-renderer for cert-manager's chart on the one-node, host-network-only cluster: reads
# the rendered manifests on stdin and writes them on stdout with cert-manager-hostnetwork.yaml
# applied to every Deployment (kustomize: KUSTOMIZE, default bin/kustomize from `make kustomize`).
#
#   bin/helm template ... -f hack/realnode/cert-manager-values.yaml \
#     --post-renderer hack/realnode/cert-manager-postrender.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kustomize=${KUSTOMIZE:-$here/../../bin/kustomize}
[[ -x $kustomize ]] || { echo "[cert-manager-postrender] $kustomize not found: run make kustomize or set KUSTOMIZE" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/rendered.yaml"
cp "$here/cert-manager-hostnetwork.yaml" "$work/hostnetwork.yaml"
cat >"$work/kustomization.yaml" <<'KUST'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - rendered.yaml
patches:
  - path: hostnetwork.yaml
    target:
      kind: Deployment
KUST
"$kustomize" build "$work"
