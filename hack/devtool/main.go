// Command devtool does the few things hack/ scripts need that plain bash does badly: pick free
// loopback ports, rewrite the rendered install manifests for an operator running on the host,
// read a field of a JSON document, and proxy the webhook's TCP connections to the operator
// replicas. The scripts build it into bin/devtool (see devtool in hack/lib/common.sh). make lint
// runs its conflictcheck: test writes that another writer of the object can make fail.
//
//	devtool free-ports N [ENV_FILE...]         N distinct free 127.0.0.1 ports, none recorded as *_PORT= in the files
//	devtool install-manifests URL_BASE CA_FILE  kustomize YAML on stdin -> JSON List for `kubectl apply`
//	devtool json-field PATH [DEFAULT]           JSON on stdin -> the string at PATH (dot-separated)
//	devtool names KIND RESOURCE                 JSON List on stdin -> RESOURCE/NAME of each item of KIND
//	devtool proxy PORT BACKENDS_FILE            TCP proxy on 127.0.0.1:PORT to the replicas in the file
//	devtool chart DIR VERSION POLICY MONITORING LOCAL_NODE
//	                                            kustomize YAML on stdin (config/default) and in the files
//	                                            POLICY (config/policy-mode), MONITORING (config/monitoring)
//	                                            and LOCAL_NODE (config/local-node) -> a Helm chart in DIR
//	devtool argocd DIR                          kustomize YAML on stdin (config/default) and DIR/health.lua -> Argo CD's
//	                                            settings in DIR/argocd-cm.yaml and DIR/argo-cd-values.yaml
//	devtool image BINARY OUT.tar NAME:TAG VER    a container image tarball holding BINARY as /manager, non-root
//	devtool registry PORT DIR [AUTH_FILE]      an OCI registry on 127.0.0.1:PORT, blobs in DIR (the real node pulls from it);
//	                                            with AUTH_FILE (user:password) pushes need those credentials
//	devtool push REF BINARY|IMAGE.tar [ARG|ENV=VALUE...]
//	                                            push an image tarball, or BINARY as a one-file image, to REF,
//	                                            with the credentials in the file $SIDECARSET_REGISTRY_AUTH names
//	devtool conflictcheck DIR[/...]|FILE...     the Updates in those Go files a concurrent writer can make fail with a
//	                                            conflict: not re-read in retry.RetryOnConflict, not marked
//	                                            //conflict-safe: <reason> (make lint runs it on ./test/...)
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "devtool:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return usage()
	}
	cmd, args := args[0], args[1:]
	switch {
	case cmd == "free-ports" && len(args) >= 1:
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 1 {
			return fmt.Errorf("free-ports: %q is not a positive number", args[0])
		}
		ports, err := freePorts(n, args[1:])
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, joinInts(ports))
		return err
	case cmd == "install-manifests" && len(args) == 2:
		ca, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		in, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		out, err := installManifests(in, args[0], ca)
		if err != nil {
			return fmt.Errorf("render install manifests: %w", err)
		}
		_, err = stdout.Write(out)
		return err
	case cmd == "chart" && len(args) == 5:
		src := chartSources{}
		var err error
		if src.Default, err = io.ReadAll(stdin); err != nil {
			return err
		}
		for i, rendering := range []*[]byte{&src.Policy, &src.Monitoring, &src.LocalNode} {
			if *rendering, err = os.ReadFile(args[2+i]); err != nil {
				return err
			}
		}
		return writeChart(src, args[0], args[1])
	case cmd == "argocd" && len(args) == 1:
		in, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		return writeArgoCD(in, args[0])
	case cmd == "image" && len(args) == 4:
		return buildImage(args[0], args[1], args[2], args[3])
	case cmd == "registry" && (len(args) == 2 || len(args) == 3):
		port, err := strconv.Atoi(args[0])
		if err != nil {
			return fmt.Errorf("registry: %q is not a port", args[0])
		}
		authFile := ""
		if len(args) == 3 {
			authFile = args[2]
		}
		return serveRegistry(port, args[1], authFile)
	case cmd == "push" && len(args) >= 2:
		auth, err := pushAuth()
		if err != nil {
			return err
		}
		return pushImage(args[0], args[1], args[2:], auth)
	case cmd == "json-field" && (len(args) == 1 || len(args) == 2):
		in, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		def := ""
		if len(args) == 2 {
			def = args[1]
		}
		v, err := jsonField(in, args[0], def, len(args) == 2)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, v)
		return err
	case cmd == "names" && len(args) == 2:
		in, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		names, err := listNames(in, args[0], args[1])
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, strings.Join(names, " "))
		return err
	case cmd == "conflictcheck" && len(args) >= 1:
		return conflictCheck(args, stdout)
	case cmd == "proxy" && len(args) == 2:
		port, err := strconv.Atoi(args[0])
		if err != nil {
			return fmt.Errorf("proxy: %q is not a port", args[0])
		}
		return serveProxy(port, args[1])
	}
	return usage()
}

func usage() error {
	return fmt.Errorf("usage: devtool free-ports N [ENV_FILE...] | install-manifests URL_BASE CA_FILE | " +
		"json-field PATH [DEFAULT] | names KIND RESOURCE | proxy PORT BACKENDS_FILE | chart DIR VERSION POLICY MONITORING LOCAL_NODE | argocd DIR | image BINARY OUT.tar NAME:TAG VERSION | " +
		"registry PORT DIR [AUTH_FILE] | conflictcheck DIR[/...]|FILE... | push REF BINARY|IMAGE.tar [ARG|ENV=VALUE...]")
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}
