package refusals

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/eventcatalog"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// QuietPeriod is how long after its latest refusal a set's Refusing condition turns False, and
// after which a replica's next refusal starts a new entry.
const QuietPeriod = 10 * time.Minute

// EventInterval is the least time between two PodRefused events on one set from one replica.
const EventInterval = time.Minute

// maxListed is how many namespaces and workloads an entry names.
const maxListed = 10

// EventReason is the reason of the Warning event on a SidecarSet whose pods the webhook refused.
const EventReason = eventcatalog.PodRefused

// Ledger is one replica's record of the pods its webhook refused, per SidecarSet.
type Ledger struct {
	// Replica names this replica in status.refusals (its pod's name).
	Replica string
	// Client writes the sets' status (server-side apply of status.refusals).
	Client client.Client
	// Recorder writes the PodRefused events on the sets; nil writes none.
	Recorder events.EventRecorder
	// Interval is how long the ledger gathers refusals before it writes them (2 s when zero).
	Interval time.Duration
	// Quiet is the quiet period after which a refusal starts a new entry (QuietPeriod when
	// zero); the status reconciler must use the same.
	Quiet time.Duration

	now    func() time.Time
	mu     sync.Mutex
	sets   map[string]*entry
	wake   chan struct{}
	events map[string]time.Time // set -> when this replica last wrote an event on it
}

// entry is one set's refusals on this replica, and whether they are written.
type entry struct {
	status appsv1alpha1.ReplicaRefusals
	set    *appsv1alpha1.SidecarSet // the set as the webhook saw it, for the event
	dirty  bool
	noted  int64 // refusals the last event covered
}

// Refused records that the webhook refused a pod because of set: reason and message are the
// engine's, namespace is the pod's, workload its controller (namespace/Kind/name, "" when it
// has none). Never call it for a dry run: a dry run has no side effects.
func (l *Ledger) Refused(set *appsv1alpha1.SidecarSet, reason inject.Reason, message, namespace, workload string) {
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sets == nil {
		l.sets, l.events = map[string]*entry{}, map[string]time.Time{}
	}
	e, ok := l.sets[set.Name]
	quiet := l.Quiet
	if quiet == 0 {
		quiet = QuietPeriod
	}
	if !ok || now.Sub(e.status.Last.Time) > quiet || e.status.Generation != set.Generation {
		e = &entry{status: appsv1alpha1.ReplicaRefusals{Replica: l.Replica, Since: metav1.NewTime(now), Generation: set.Generation}}
		l.sets[set.Name] = e
	}
	e.set = set
	e.status.Count++
	e.status.Last = metav1.NewTime(now)
	e.status.Reason, e.status.Message = string(reason), truncate(message, 2048)
	e.status.Namespaces = mostRecent(e.status.Namespaces, namespace)
	if workload != "" {
		e.status.Workloads = mostRecent(e.status.Workloads, workload)
	}
	e.dirty = true
	if l.wake == nil {
		l.wake = make(chan struct{}, 1)
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Start writes what was recorded until ctx ends: a manager Runnable that runs on every replica
// (each serves admissions), not only on the leader.
func (l *Ledger) Start(ctx context.Context) error {
	l.mu.Lock()
	if l.wake == nil {
		l.wake = make(chan struct{}, 1)
	}
	wake := l.wake
	l.mu.Unlock()
	interval := l.Interval
	if interval == 0 {
		interval = 2 * time.Second
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		l.Flush(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval): // gather the next refusals of a burst into one write
		}
	}
}

// NeedLeaderElection: every replica writes its own refusals.
func (l *Ledger) NeedLeaderElection() bool { return false }

// Flush writes the refusals recorded since the last write: each set's status entry for this
// replica, and an event on the set where EventInterval has passed. A write that fails is tried
// again with the next refusal of that set.
func (l *Ledger) Flush(ctx context.Context) {
	for _, w := range l.pending() {
		if err := l.apply(ctx, w.set.Name, w.status); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Writing refused pods into the SidecarSet's status", "sidecarSet", w.set.Name)
			l.mu.Lock()
			if e := l.sets[w.set.Name]; e != nil {
				e.dirty = true
			}
			l.mu.Unlock()
		}
		if w.event != "" {
			eventcatalog.Recorder{To: l.Recorder}.Record(w.set, EventReason, "Inject", "%s", w.event)
		}
	}
}

// write is one set's pending write.
type write struct {
	set    *appsv1alpha1.SidecarSet
	status appsv1alpha1.ReplicaRefusals
	event  string
}

// pending takes the sets with refusals not yet written, with the event to write for each
// (empty within EventInterval of the last one).
func (l *Ledger) pending() []write {
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []write
	for name, e := range l.sets {
		if !e.dirty {
			continue
		}
		e.dirty = false
		w := write{set: e.set, status: *e.status.DeepCopy()}
		if now.Sub(l.events[name]) >= EventInterval {
			l.events[name] = now
			n := e.status.Count - e.noted
			if n <= 0 || n > e.status.Count {
				n = e.status.Count
			}
			e.noted = e.status.Count
			w.event = fmt.Sprintf("The pod webhook refused %d pod(s) this SidecarSet selects (%s), in namespace(s) %s: %s",
				n, e.status.Reason, strings.Join(e.status.Namespaces, ", "), e.status.Message)
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b write) int { return strings.Compare(a.set.Name, b.set.Name) })
	return out
}

// apply writes this replica's entry of status.refusals by server-side apply: the field manager
// names the replica, so each replica owns its own entry of the list (a map keyed by replica)
// and no write of one replaces another's, nor what the status reconciler writes.
func (l *Ledger) apply(ctx context.Context, set string, status appsv1alpha1.ReplicaRefusals) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": appsv1alpha1.GroupVersion.String(), "kind": "SidecarSet",
		"metadata": map[string]any{"name": set},
		"status":   map[string]any{"refusals": []appsv1alpha1.ReplicaRefusals{status}},
	})
	if err != nil {
		return fmt.Errorf("encoding status.refusals: %w", err)
	}
	obj := &appsv1alpha1.SidecarSet{}
	obj.Name = set
	return l.Client.Status().Patch(ctx, obj, client.RawPatch(types.ApplyPatchType, body),
		client.FieldOwner(FieldManager(l.Replica)), client.ForceOwnership)
}

// FieldManager is the field manager a replica's writes of status.refusals go under.
func FieldManager(replica string) string { return truncate("sidecarset-webhook-"+replica, 128) }

func (l *Ledger) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// mostRecent is list with v moved (or added) to the front, at most maxListed long.
func mostRecent(list []string, v string) []string {
	out := make([]string, 0, min(len(list)+1, maxListed))
	out = append(out, v)
	for _, x := range list {
		if x != v && len(out) < maxListed {
			out = append(out, x)
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
