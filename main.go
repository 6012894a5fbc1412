/*
Copyright 2026 The sidecarset-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command manager runs sidecarset-operator: the pod injector and SidecarSet validating
// webhooks on every replica, and the status reconciler on the elected leader.
package main

import (
	"crypto/tls"
	"flag"
	"os"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/operator"
	ourwebhook "github.com/sidecarset/sidecarset-operator/internal/webhook"
)

// olmCertDir is where OLM mounts the webhook serving certificate (tls.crt, tls.key); it is
// also controller-runtime's default.
const olmCertDir = "/tmp/k8s-webhook-server/serving-certs"

type flags struct {
	metricsAddr, probeAddr, pprofAddr       string
	secureMetrics, enableHTTP2, leaderElect bool
	webhookCertPath, webhookCertName        string
	webhookCertKey, webhookHost             string
	webhookPort                             int
	webhookDrain                            time.Duration
	leaderElectionNamespace                 string
	injection                               string
	excludedNamespaces                      string
	patchPodMetadataAllowedKeys             string
	insecureRegistries                      string
}

func parseFlags() (flags, zap.Options) {
	var f flags
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", "0", "The address the metrics endpoint binds to, "+
		"e.g. :8443 for HTTPS or :8080 for HTTP; 0 disables it.")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to.")
	flag.StringVar(&f.pprofAddr, "pprof-bind-address", "0", "The address Go's /debug/pprof profiles are served on over plain HTTP, "+
		"e.g. 127.0.0.1:8082; 0 disables them. Unauthenticated: bind it to loopback.")
	flag.BoolVar(&f.leaderElect, "leader-elect", false, "Enable leader election for the status reconciler, "+
		"so that one replica writes status while every replica serves the webhooks.")
	flag.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election "+
		"Lease; defaults to the namespace the operator runs in.")
	flag.BoolVar(&f.secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS with authentication and authorization.")
	flag.BoolVar(&f.enableHTTP2, "enable-http2", false, "Enable HTTP/2 for the metrics and webhook servers.")
	flag.StringVar(&f.webhookCertPath, "webhook-cert-path", "", "The directory holding the webhook certificate; "+
		"defaults to "+olmCertDir+", where OLM mounts it.")
	flag.StringVar(&f.webhookCertName, "webhook-cert-name", "tls.crt", "The webhook certificate file name.")
	flag.StringVar(&f.webhookCertKey, "webhook-cert-key", "tls.key", "The webhook key file name.")
	flag.StringVar(&f.webhookHost, "webhook-host", "", "The address the webhook server binds to; empty means all interfaces.")
	flag.IntVar(&f.webhookPort, "webhook-port", 9443, "The port the webhook server listens on.")
	flag.DurationVar(&f.webhookDrain, "webhook-drain-duration", ourwebhook.DefaultDrain, "How long the webhook server goes on "+
		"answering once the manager is asked to stop: it reports not ready, so that it leaves the Service, and closes each "+
		"connection once it has answered on it, so that the API server sends its next review to another replica; then it "+
		"shuts down. Keep it under the Pod's terminationGracePeriodSeconds less the webhooks' timeoutSeconds.")
	flag.StringVar(&f.injection, "injection", operator.InjectionWebhook, "How opted-in pods get their sidecars: "+
		"\""+operator.InjectionWebhook+"\" (the pod webhook injects every pod) or \""+operator.InjectionPolicy+"\" (each SidecarSet "+
		"is compiled into a MutatingAdmissionPolicy that the API server runs; the webhook injects only the pods the "+
		"policies route to it; install with the policy-mode kustomize component).")
	flag.StringVar(&f.patchPodMetadataAllowedKeys, "patch-pod-metadata-allowed-keys", "", "Annotation keys SidecarSets may patch "+
		"onto the pods they inject (spec.patchPodMetadata), separated by commas: exact keys or prefix/* (every key under "+
		"that prefix). Empty allows none; keys under sidecarset.io/ never. A set's other keys are left out with a warning.")
	flag.StringVar(&f.excludedNamespaces, "excluded-namespaces", "", "Namespaces whose pods are never injected, "+
		"separated by commas, besides kube-system and the operator's own: status and rollouts count their pods as excluded, "+
		"and in policy mode the policies leave them alone. Exclude them in the pod webhook's namespaceSelector too "+
		"(the Helm chart's webhook.excludedNamespaces sets both).")
	flag.StringVar(&f.insecureRegistries, "insecure-registries", "", "Registries (host[:port], separated by commas) the "+
		"operator reads the digests of SidecarSets' images from over plain HTTP rather than HTTPS (spec.imagePolicy.pin: Digest), "+
		"such as a registry on the node's loopback address. Empty: HTTPS everywhere.")
	opts := zap.Options{Development: false, TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	return f, opts
}

func main() {
	f, zapOpts := parseFlags()
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go (leader election among others) logs through klog
	log := ctrl.Log.WithName("setup")
	if err := run(f); err != nil {
		log.Error(err, "Manager exited with an error")
		os.Exit(1)
	}
}

func run(f flags) error {
	log := ctrl.Log.WithName("setup")
	ctx := ctrl.SetupSignalHandler()
	scheme, err := operator.NewScheme()
	if err != nil {
		return err
	}
	var tlsOpts []func(*tls.Config)
	if !f.enableHTTP2 {
		// HTTP/2 stream cancellation and rapid reset (CVE-2023-44487, CVE-2023-39325).
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	certDir := f.webhookCertPath
	if certDir == "" {
		certDir = olmCertDir
	}

	metricsOpts := metricsserver.Options{BindAddress: f.metricsAddr, SecureServing: f.secureMetrics, TLSOpts: tlsOpts}
	if f.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	namespace := os.Getenv("POD_NAMESPACE")
	// The Lease names the replica that leads (POD_NAME from the Downward API, else the hostname).
	replica := os.Getenv("POD_NAME")
	if replica == "" {
		if replica, err = os.Hostname(); err != nil {
			return err
		}
	}
	cfg := ctrl.GetConfigOrDie()
	// Uncompressed responses, as kube-controller-manager and kube-scheduler ask for: the operator
	// runs beside the API server, whose CPU gzip would cost on every pod event of its informer
	// (Kubernetes 1.37 compresses WatchList streams for clients that accept gzip), the API
	// server being what limits pod creation on a busy control plane (docs/benchmarks.md).
	cfg.DisableCompression = true
	// controller-runtime's webhook server with read, write and idle timeouts, serving the
	// certificate in certDir and each renewal of it without a restart; it is ready only while it
	// presents the certificate the files hold.
	webhookServer := ourwebhook.NewServer(webhook.Options{Host: f.webhookHost, Port: f.webhookPort, TLSOpts: tlsOpts,
		CertDir: certDir, CertName: f.webhookCertName, KeyName: f.webhookCertKey})
	webhookServer.SetDrain(f.webhookDrain)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   operator.CacheOptions(namespace, f.injection),
		Metrics:                 metricsOpts,
		WebhookServer:           webhookServer,
		HealthProbeBindAddress:  f.probeAddr,
		PprofBindAddress:        f.pprofAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "sidecarset-operator.sidecarset.io",
		LeaderElectionNamespace: f.leaderElectionNamespace,
		LeaderElectionLabels:    map[string]string{appsv1alpha1.LeaderLabel: replica},
		// Step down at once on shutdown so another replica takes over status without waiting
		// for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return err
	}
	if _, err := operator.Setup(ctx, mgr, operator.Options{Namespace: namespace, Injection: f.injection,
		ExcludedNamespaces:          operator.ParseList(f.excludedNamespaces),
		PatchPodMetadataAllowedKeys: strings.Split(f.patchPodMetadataAllowedKeys, ","),
		InsecureRegistries:          operator.ParseList(f.insecureRegistries)}); err != nil {
		return err
	}
	log.Info("Starting manager", "webhookPort", f.webhookPort, "certDir", certDir, "leaderElection", f.leaderElect, "injection", f.injection)
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	// The manager has stopped and handed the lease over; the webhook server may still drain.
	return webhookServer.Wait()
}
