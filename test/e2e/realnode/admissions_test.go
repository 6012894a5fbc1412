//go:build e2e

package realnode

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// admissions keeps creating opted-in pods that a set injects with the sidecar named sidecar, as
// server-side dry runs: each goes through the whole admission chain, our webhook over the TLS
// connection the API server opens to it included, and comes back as it would be stored, without
// leaving a pod for the node to run. It records each creation's start and what became of it.
type admissions struct {
	ns, app, sidecar string
	every            time.Duration

	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	results []admission
}

// admission is one creation: when it was sent and what came back.
type admission struct {
	sent time.Time
	// err is the API server's answer when it refused or failed the creation.
	err error
	// injected is whether the pod came back with the sidecar.
	injected bool
}

// startAdmissions creates one pod every every until stopped.
func startAdmissions(t testing.TB, ns, app, sidecar string, every time.Duration) *admissions {
	t.Helper()
	a := &admissions{ns: ns, app: app, sidecar: sidecar, every: every, stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	t.Cleanup(func() { a.halt() })
	return a
}

func (a *admissions) run() {
	defer close(a.done)
	tick := time.NewTicker(a.every)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-a.stop:
			return
		case <-tick.C:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.create(i)
		}()
	}
}

func (a *admissions) create(i int) {
	pod := builders.Pod(a.ns, fmt.Sprintf("%s-%d", a.app, i), builders.OptedIn(), builders.WithLabels(map[string]string{"app": a.app}),
		builders.WithSpec(corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image("app:v1")}}}))
	r := admission{sent: time.Now()}
	r.err = k8s.Create(ctx, pod, client.DryRunAll)
	if r.err == nil {
		r.injected = containerNamed(pod.Spec.Containers, a.sidecar) != nil
	}
	a.mu.Lock()
	a.results = append(a.results, r)
	a.mu.Unlock()
}

// halt stops creating pods and waits for the creations in flight.
func (a *admissions) halt() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

// Tally is what became of the creations sent at or after since.
type Tally struct {
	Sent, Failed, WithoutSidecar int
	// FirstFailure is the first failed creation's error.
	FirstFailure error
}

func (a *admissions) tally(since time.Time) Tally {
	a.mu.Lock()
	defer a.mu.Unlock()
	var c Tally
	for _, r := range a.results {
		if r.sent.Before(since) {
			continue
		}
		c.Sent++
		switch {
		case r.err != nil:
			c.Failed++
			if c.FirstFailure == nil {
				c.FirstFailure = r.err
			}
		case !r.injected:
			c.WithoutSidecar++
		}
	}
	return c
}
