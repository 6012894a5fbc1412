package testutil

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Budget keeps the highest number of a namespace's Pods seen unavailable at once (PodAvailable:
// not Ready, being deleted, or running another image than the spec names): what a rolling
// update's maxUnavailable bounds. Safe for concurrent use.
type Budget struct {
	mu      sync.Mutex
	highest int
}

// Observe counts the unavailable Pods of one listing.
func (b *Budget) Observe(pods []corev1.Pod) {
	n := 0
	for i := range pods {
		if !PodAvailable(&pods[i]) {
			n++
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.highest = max(b.highest, n)
}

// Reset forgets the highest count seen so far.
func (b *Budget) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.highest = 0
}

// Highest is the most Pods seen unavailable at once since the start or the last Reset.
func (b *Budget) Highest() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.highest
}

// WatchBudget lists ns's Pods every interval until the test ends and observes each listing.
func WatchBudget(ctx context.Context, t testing.TB, reader client.Reader, ns string, interval time.Duration) *Budget {
	t.Helper()
	b := &Budget{}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for runCtx.Err() == nil {
			var pods corev1.PodList
			if err := reader.List(runCtx, &pods, client.InNamespace(ns)); err == nil {
				b.Observe(pods.Items)
			}
			time.Sleep(interval)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return b
}
