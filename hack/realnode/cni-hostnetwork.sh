#!/usr/bin/env bash
# A placeholder CNI plugin for the local cluster's real node, which has no pod network: it makes
# the runtime report its network ready (so the node turns Ready) and refuses to set up a pod's
# network, so that only hostNetwork pods run there. Installed as "loopback" too: containerd
# always tears a sandbox's loopback interface down through that plugin, and a failing DEL would
# leave the pod Terminating forever.
set -euo pipefail
cat >/dev/null
case ${CNI_COMMAND:-} in
  VERSION)
    echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}'
    ;;
  ADD)
    echo '{"cniVersion":"1.0.0","code":100,"msg":"this node has no pod network: use hostNetwork: true"}'
    exit 1
    ;;
  *) ;; # DEL, CHECK, STATUS, GC: nothing was set up, so nothing to do.
esac
