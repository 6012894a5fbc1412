//go:build e2e && faults

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// flakyAPIServer is a proxy in front of the API server for an operator replica: it holds every
// request for latency before passing it on, and answers some without passing them on, as an
// overloaded API server does (API Priority and Fairness's 429, with Retry-After) or one that
// fails (500, which client-go does not retry): every tooManyEvery-th request gets 429 and
// every failEvery-th 500, counting every request but the leader election Lease's. It counts
// what it passed on, per namespace it names.
type flakyAPIServer struct {
	latency                 time.Duration
	tooManyEvery, failEvery int64

	seen, faultable, tooMany, failed atomic.Int64
	mu                               sync.Mutex
	// passed counts the requests passed on, by namespace ("" for cluster-scoped ones) and by
	// whether they write (anything but GET, LIST and WATCH).
	passed map[string]*passedCounts
}

type passedCounts struct{ reads, writes int }

// startFlakyAPIServer starts the proxy on a free loopback port, authenticating to the API
// server as the tests do, and returns it and a kubeconfig that reaches the API server through it
// (plain HTTP on loopback, no credentials of its own).
func startFlakyAPIServer(t *testing.T, latency time.Duration, tooManyEvery, failEvery int64) (*flakyAPIServer, string) {
	t.Helper()
	target, err := url.Parse(restConfig.Host)
	must(t, err)
	transport, err := rest.TransportFor(restConfig)
	must(t, err)
	f := &flakyAPIServer{latency: latency, tooManyEvery: tooManyEvery, failEvery: failEvery, passed: map[string]*passedCounts{}}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, proxy) }), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	kubeconfig := filepath.Join(t.TempDir(), "flaky.kubeconfig")
	must(t, os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: flaky
  cluster: {server: "http://%s"}
users:
- name: flaky
  user: {}
contexts:
- name: flaky
  context: {cluster: flaky, user: flaky}
current-context: flaky
`, l.Addr())), 0o600))
	return f, kubeconfig
}

func (f *flakyAPIServer) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	f.seen.Add(1)
	time.Sleep(f.latency)
	status := func(code int, reason, message string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"message":%q,"code":%d}`, reason, message, code)
	}
	// Leases are delayed but never failed: a replica that cannot renew its lease for the renew
	// deadline gives up leading by design (TestLeaderFailover covers a leader change), which
	// would end this test's replica rather than show how it copes.
	var n int64
	if !strings.Contains(r.URL.Path, "/leases/") {
		n = f.faultable.Add(1)
	}
	switch {
	case n == 0:
	case f.tooManyEvery > 0 && n%f.tooManyEvery == 0:
		f.tooMany.Add(1)
		w.Header().Set("Retry-After", "1")
		status(http.StatusTooManyRequests, "TooManyRequests", "the flaky proxy of the e2e test says: too many requests, please try again later")
		return
	case f.failEvery > 0 && n%f.failEvery == 0:
		f.failed.Add(1)
		status(http.StatusInternalServerError, "InternalError", "the flaky proxy of the e2e test failed this request")
		return
	}
	ns := ""
	if _, after, ok := strings.Cut(r.URL.Path, "/namespaces/"); ok {
		ns, _, _ = strings.Cut(after, "/")
	}
	f.mu.Lock()
	c := f.passed[ns]
	if c == nil {
		c = &passedCounts{}
		f.passed[ns] = c
	}
	if r.Method == http.MethodGet {
		c.reads++
	} else {
		c.writes++
	}
	f.mu.Unlock()
	next.ServeHTTP(w, r)
}

// String lists what the proxy passed on, by namespace.
func (f *flakyAPIServer) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for ns, c := range f.passed {
		if ns == "" {
			ns = "(cluster)"
		}
		parts = append(parts, fmt.Sprintf("%s %d reads %d writes", ns, c.reads, c.writes))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// counts is what the proxy passed on for ns, and in all.
func (f *flakyAPIServer) counts(ns string) (inNamespace passedCounts, all int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, c := range f.passed {
		all += c.reads + c.writes
		if name == ns {
			inNamespace = *c
		}
	}
	return inNamespace, all
}

// TestRolloutThroughASlowFlakyAPIServer: the leading replica reaches the API server only through
// a proxy that adds 200 ms to every request and answers one request in 5 with 429 and one in 8
// with 500. An in-place rollout over 6 pods (maxUnavailable 2) still keeps its budget, patches
// each pod once, ends Complete with exact counts, and asks no more of the API server per pod
// than a bounded number of requests: no hot loop on errors.
func TestRolloutThroughASlowFlakyAPIServer(t *testing.T) {
	flaky, kubeconfig := startFlakyAPIServer(t, 200*time.Millisecond, 5, 8)
	stopOperator(t, "operator-0", "TERM")
	t.Cleanup(func() { must(t, startOperator("operator-0")) })
	must(t, runWithEnv([]string{"SIDECARSET_OPERATOR_KUBECONFIG=" + kubeconfig},
		"operator-start", "flaky-0", "--leader-elect", "--leader-election-namespace", operatorNamespace))
	t.Cleanup(func() {
		if err := run("operator-stop", "flaky-0"); err != nil {
			t.Error(err)
		}
	})

	start := time.Now()
	_, all0 := flaky.counts("")
	r := startInterruptedRollout(t, "flaky", "flaked", "500")
	writes := r.finish(t, "registry.example/agent:2.0", 1, true)
	inNs, all1 := flaky.counts(r.ns)
	const pods = 6
	total := all1 - all0
	t.Logf("through 200 ms per request, %d 429s and %d 500s of %d requests since the replica started: %d pods created, injected and "+
		"rolled in %s with %.0f pod writes; the replica sent the API server %d requests in the pods' namespace (%d reads, %d writes) "+
		"and %d in all meanwhile, %.1f per pod",
		flaky.tooMany.Load(), flaky.failed.Load(), flaky.seen.Load(), pods, time.Since(start).Round(time.Second),
		writes, inNs.reads+inNs.writes, inNs.reads, inNs.writes, total, float64(total)/pods)
	t.Logf("passed on since the replica started: %s", flaky)
	if writes != pods {
		t.Errorf("%.0f pod writes for %d pods: a pod was patched twice (or missed)", writes, pods)
	}
	if flaky.tooMany.Load() == 0 || flaky.failed.Load() == 0 {
		t.Errorf("the proxy answered %d requests with 429 and %d with 500; the test needs both", flaky.tooMany.Load(), flaky.failed.Load())
	}
	// The replica's informers watch; it reads a pod only to evict or to resize it. A hot loop on
	// errors would read or write again and again.
	if limit := 20 * pods; total > limit {
		t.Errorf("%d requests reached the API server during a rollout of %d pods; want at most %d (a loop retrying without backoff?)", total, pods, limit)
	}
}
