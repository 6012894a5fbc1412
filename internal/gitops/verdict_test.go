package gitops

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/refusals"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/internal/status"
)

var now = metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))

// input is what the status reconciler gathers for one set.
type input struct {
	// spec shapes the set (podtest.Set's: selects app=demo, one sidecar, generation 3).
	spec      []func(*appsv1alpha1.SidecarSet)
	counts    status.Counts
	conflicts []snapshot.Conflict
	ro        *rollout.State
	// waiting: the set pins digests (imagePolicy.pin Digest) and these images wait; injected:
	// it injected a revision before, which new pods get meanwhile (else it compiles to nothing).
	waiting  *inject.ImagesNotResolvedError
	injected bool
	// policy is the PolicyCompiled condition in policy mode; nil in webhook mode.
	policy *metav1.Condition
	// invalid: the spec cannot be compiled (written while the validating webhook was down).
	invalid bool
}

// written is the SidecarSet as the API server holds it once the operator wrote its status for
// in: the functions of internal/status, called as StatusReconciler.compute and Reconcile call
// them.
func written(t *testing.T, in input) *appsv1alpha1.SidecarSet {
	t.Helper()
	compiled := podtest.Set(t, "mesh", nil, in.spec...)
	set := compiled.Set.DeepCopy()
	var st appsv1alpha1.SidecarSetStatus
	switch {
	case in.invalid:
		set.Spec.Selector.MatchLabels = map[string]string{"-bad": "x"}
		_, err := inject.Compile(set)
		if err == nil {
			t.Fatal("the invalid set compiles")
		}
		st = status.Invalid(set, err, now)
	case in.waiting != nil && !in.injected:
		pinDigests(set)
		st = appsv1alpha1.SidecarSetStatus{ObservedGeneration: set.Generation}
		status.WithImages(&st.Conditions, nil, set, in.waiting, "", now)
	default:
		st = status.Compute(compiled, in.counts, in.conflicts, in.ro, nil, now)
		if in.waiting != nil {
			pinDigests(set)
			status.WithImages(&st.Conditions, nil, set, in.waiting, "mesh-6f4c", now)
		} else {
			status.WithImages(&st.Conditions, nil, set, nil, "", now)
		}
		if in.policy != nil {
			p := *in.policy
			p.ObservedGeneration, p.LastTransitionTime = set.Generation, now
			status.WithPolicy(&st.Conditions, nil, p)
		}
	}
	st.Refusals, _ = status.WithRefusals(&st.Conditions, nil, nil, set.Generation, now.Time, refusals.QuietPeriod)
	set.Status = st
	return set
}

func pinDigests(set *appsv1alpha1.SidecarSet) {
	set.Spec.ImagePolicy = &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest}
}

func rolling(paused bool) func(*appsv1alpha1.SidecarSet) {
	return func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, Paused: paused}
	}
}

func injectionPaused(s *appsv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.Paused = true }

// TestVerdicts: what Argo CD (health.lua run as Argo CD runs it) and kstatus say of the
// statuses the operator writes, and that the two agree by the mapping of docs/gitops.md.
func TestVerdicts(t *testing.T) {
	all := status.Counts{Matched: 4, Updated: 4, Ready: 4, UpdatedReady: 4}
	half := status.Counts{Matched: 4, Updated: 2, Ready: 4, UpdatedReady: 2, Unavailable: 1, Restarting: 1}
	stopped := []snapshot.Conflict{{With: "older", Stopped: true, Fields: []string{`spec.containers[0].name: "proxy"`}}}
	blocked := []rollout.BlockedPod{{Namespace: "shop", Name: "web-0", Why: "spec.containers[mesh].env: changed"}}
	policy := func(status metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: appsv1alpha1.ConditionPolicyCompiled, Status: status, Reason: reason, Message: "the policy says " + reason}
	}
	tests := []struct {
		name string
		in   input
		// later changes the stored set after the status was written (a spec the operator has
		// not observed yet).
		later   func(*appsv1alpha1.SidecarSet)
		argo    HealthStatus
		kstatus kstatus.Status
		// message is part of Argo CD's message.
		message string
	}{
		{name: "injecting, nothing to roll", in: input{counts: all},
			argo: Healthy, kstatus: kstatus.CurrentStatus, message: "injects new matching pods"},
		{name: "rolling update complete", in: input{spec: fns(rolling(false)), counts: all, ro: &rollout.State{}},
			argo: Healthy, kstatus: kstatus.CurrentStatus},
		{name: "rolling update progressing", in: input{spec: fns(rolling(false)), counts: half,
			ro: &rollout.State{Plan: rollout.Plan{Update: []int{2}, Waiting: 1, MaxUnavailable: 1, Restarting: 1}}},
			argo: Progressing, kstatus: kstatus.InProgressStatus, message: "2 of 4 matched pods carry hash"},
		{name: "rolling update waiting for the kubelet", in: input{spec: fns(rolling(false)), counts: status.Counts{Matched: 4, Updated: 4, Ready: 3, UpdatedReady: 3, Restarting: 1},
			ro: &rollout.State{Plan: rollout.Plan{Restarting: 1}}},
			argo: Progressing, kstatus: kstatus.InProgressStatus, message: "waiting for the kubelet"},
		{name: "rolling update not planned yet", in: input{spec: fns(rolling(false)), counts: half},
			argo: Progressing, kstatus: kstatus.InProgressStatus, message: "has not planned this spec yet"},
		{name: "rolling update paused", in: input{spec: fns(rolling(true)), counts: half, ro: &rollout.State{Plan: rollout.Plan{Waiting: 2}}},
			argo: Suspended, kstatus: kstatus.InProgressStatus, message: "spec.updateStrategy.paused is true"},
		{name: "injection paused", in: input{spec: fns(injectionPaused), counts: all},
			argo: Suspended, kstatus: kstatus.CurrentStatus, message: "injection is paused"},
		{name: "injection paused, rolling update progressing", in: input{spec: fns(injectionPaused, rolling(false)), counts: half,
			ro: &rollout.State{Plan: rollout.Plan{Update: []int{2}, MaxUnavailable: 1}}},
			argo: Progressing, kstatus: kstatus.InProgressStatus},
		{name: "rolling update halted", in: input{spec: fns(rolling(false)), counts: half,
			ro: &rollout.State{Halted: status.HaltSummary(blocked, 600)}},
			argo: Degraded, kstatus: kstatus.FailedStatus, message: "the rollout starts no update or eviction until the spec changes"},
		{name: "pods not updatable", in: input{spec: fns(rolling(false)), counts: status.Counts{Matched: 4, Updated: 2, Ready: 4, UpdatedReady: 2},
			ro: &rollout.State{Blocked: blocked}},
			argo: Degraded, kstatus: kstatus.FailedStatus, message: "cannot be updated in place"},
		{name: "stopped by a conflict with an older set", in: input{counts: all, conflicts: stopped},
			argo: Degraded, kstatus: kstatus.FailedStatus, message: `conflicts with the older SidecarSet "older"`},
		{name: "stopped by a conflict, rolling update paused", in: input{spec: fns(rolling(true)), counts: half, conflicts: stopped,
			ro: &rollout.State{Plan: rollout.Plan{Waiting: 2}}},
			argo: Degraded, kstatus: kstatus.FailedStatus},
		{name: "the older set of a conflict", in: input{counts: all, conflicts: []snapshot.Conflict{{With: "newer", Fields: []string{"f"}}}},
			argo: Healthy, kstatus: kstatus.CurrentStatus},
		{name: "invalid", in: input{invalid: true},
			argo: Degraded, kstatus: kstatus.FailedStatus, message: "The SidecarSet is invalid"},
		{name: "a generation not observed yet", in: input{counts: all}, later: func(s *appsv1alpha1.SidecarSet) { s.Generation++ },
			argo: Progressing, kstatus: kstatus.InProgressStatus, message: "Waiting for the operator to observe generation 4"},
		{name: "images resolving, a revision injected before", in: input{counts: all, injected: true,
			waiting: &inject.ImagesNotResolvedError{Set: "mesh", Images: []string{"registry.example/mesh:2"}, Reasons: []string{""}}},
			argo: Progressing, kstatus: kstatus.InProgressStatus, message: "new matching pods get revision mesh-6f4c"},
		{name: "images resolving, nothing injected yet", in: input{
			waiting: &inject.ImagesNotResolvedError{Set: "mesh", Images: []string{"registry.example/mesh:2"}, Reasons: []string{"unauthorized"}}},
			argo: Progressing, kstatus: kstatus.InProgressStatus, message: "registry.example/mesh:2 (unauthorized)"},
		{name: "signature being verified", in: input{counts: all, injected: true,
			waiting: &inject.ImagesNotResolvedError{Set: "mesh", Unverified: []string{"registry.example/mesh:2@sha256:aa"}, UnverifiedReasons: []string{""}}},
			argo: Progressing, kstatus: kstatus.InProgressStatus},
		{name: "signature verification failed", in: input{counts: all, injected: true,
			waiting: &inject.ImagesNotResolvedError{Set: "mesh", Unverified: []string{"registry.example/mesh:2@sha256:aa"}, UnverifiedReasons: []string{"no trusted signer signed it"}}},
			argo: Degraded, kstatus: kstatus.FailedStatus, message: "no trusted signer signed it"},
		{name: "policy mode, policy pending", in: input{counts: all, policy: policy(metav1.ConditionFalse, "Pending")},
			argo: Progressing, kstatus: kstatus.InProgressStatus, message: "the policy says Pending"},
		{name: "policy mode, policy name taken", in: input{counts: all, policy: policy(metav1.ConditionFalse, "NameTaken")},
			argo: Degraded, kstatus: kstatus.FailedStatus, message: "the policy says NameTaken"},
		{name: "policy mode, policy in force", in: input{counts: all, policy: policy(metav1.ConditionTrue, "Compiled")},
			argo: Healthy, kstatus: kstatus.CurrentStatus},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set := written(t, tc.in)
			if tc.later != nil {
				tc.later(set)
			}
			obj, err := Object(set)
			if err != nil {
				t.Fatal(err)
			}
			v, err := Judge(obj)
			if err != nil {
				t.Fatal(err)
			}
			if v.ArgoCD.Status != tc.argo || v.Kstatus != tc.kstatus || !strings.Contains(v.ArgoCD.Message, tc.message) {
				t.Errorf("%s; want Argo CD %s (with %q), kstatus %s", v, tc.argo, tc.message, tc.kstatus)
			}
			if !v.Agree() {
				t.Errorf("the verdicts disagree: %s", v)
			}
		})
	}
}

// TestVerdictsBeforeTheFirstStatus: a set the operator has not written a status for yet is
// Progressing to Argo CD and Current to kstatus, which cannot tell it from a resource that
// has no status to write: the one case where they disagree (docs/gitops.md).
func TestVerdictsBeforeTheFirstStatus(t *testing.T) {
	obj, err := Object(podtest.Set(t, "mesh", nil).Set)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Judge(obj)
	if err != nil {
		t.Fatal(err)
	}
	if v.ArgoCD.Status != Progressing || v.Kstatus != kstatus.CurrentStatus || v.Agree() {
		t.Errorf("%s (agree: %v); want Argo CD Progressing, kstatus Current, disagreeing", v, v.Agree())
	}
}

func fns(f ...func(*appsv1alpha1.SidecarSet)) []func(*appsv1alpha1.SidecarSet) { return f }
