package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestStatusRetriesSoonAfterManyFailures: a set whose status writes failed many times in a row
// (conflicts and an overloaded API server during a burst of pod events) is tried again within
// statusRetryMax of the last failure, where controller-runtime's default backoff would wait up
// to 1,000 s and leave the status stale that long once the pod events stop.
func TestStatusRetriesSoonAfterManyFailures(t *testing.T) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "busy"}}
	afterFailures := func(rl workqueue.TypedRateLimiter[reconcile.Request], n int) (last time.Duration) {
		for range n {
			last = rl.When(req)
		}
		return last
	}
	opts := statusControllerOptions(4)
	if opts.RateLimiter == nil {
		t.Fatal("the status controller has no rate limiter of its own: controller-runtime's default applies")
	}
	if wait := afterFailures(opts.RateLimiter, 40); wait > statusRetryMax {
		t.Errorf("after 40 failed writes the set waits %v for the next, want at most %v", wait, statusRetryMax)
	}
	// The default, for comparison: what the status controller used.
	if wait := afterFailures(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](), 40); wait <= statusRetryMax {
		t.Errorf("the default backoff waits %v after 40 failures: this test no longer tells the two apart", wait)
	}
	// Another set's failures do not slow this one's first retry.
	rl := statusRetries()
	afterFailures(rl, 40)
	other := reconcile.Request{NamespacedName: types.NamespacedName{Name: "quiet"}}
	if wait := rl.When(other); wait > 5*time.Millisecond {
		t.Errorf("a set with no failures waits %v", wait)
	}
}
