package controllers

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
)

// PolicyState is what the policy reconciler last did with one SidecarSet's policy.
type PolicyState struct {
	// UID and Generation identify the set the policy was rendered from.
	UID        types.UID
	Generation int64
	// Unsupported is why the policy routes every pod the set selects to the webhook; nil when
	// it injects them itself.
	Unsupported *policy.Unsupported
	// Blocked names an object that has the name of the set's policy or binding and that the
	// operator did not render: nothing is written for the set, so nothing injects its pods.
	Blocked string
	// InForce: the API server was seen running the policy as written (a probe pod came back
	// with Digest, through the probe binding with ProbeKey). Until then a pod created may pass
	// without it; Pending says why it is not yet.
	InForce          bool
	Digest, ProbeKey string
	Pending          string
}

// PolicyStates holds every set's PolicyState, written by the policy reconciler and read by the
// status reconciler for the PolicyCompiled condition. Safe for concurrent use.
type PolicyStates struct{ *published[PolicyState] }

// NewPolicyStates returns an empty PolicyStates.
func NewPolicyStates() *PolicyStates { return &PolicyStates{newPublished(equalStates)} }

func equalStates(a, b PolicyState) bool {
	sameUnsupported := (a.Unsupported == nil) == (b.Unsupported == nil) &&
		(a.Unsupported == nil || *a.Unsupported == *b.Unsupported)
	return a.UID == b.UID && a.Generation == b.Generation && a.Blocked == b.Blocked && sameUnsupported &&
		a.InForce == b.InForce && a.Digest == b.Digest && a.ProbeKey == b.ProbeKey && a.Pending == b.Pending
}

// Condition is the PolicyCompiled condition of set in policy mode, from what the policy
// reconciler did with this generation of it: True only once the API server runs its policy.
func (s *PolicyStates) Condition(set *appsv1alpha1.SidecarSet) metav1.Condition {
	st, ok := s.Get(set.Name)
	return policyCondition(set, st, ok)
}

// policyCondition is the PolicyCompiled condition of set given its policy's state (ok: there is
// one).
func policyCondition(set *appsv1alpha1.SidecarSet, st PolicyState, ok bool) metav1.Condition {
	c := metav1.Condition{Type: appsv1alpha1.ConditionPolicyCompiled, ObservedGeneration: set.Generation, Status: metav1.ConditionFalse}
	name := policy.Name(set.Name)
	switch {
	case !ok || st.UID != set.UID || st.Generation != set.Generation:
		c.Reason = "Pending"
		c.Message = fmt.Sprintf("MutatingAdmissionPolicy %s is not yet written for generation %d of this SidecarSet", name, set.Generation)
	case st.Blocked != "":
		c.Reason = "NameTaken"
		c.Message = fmt.Sprintf("%s; the operator does not overwrite it, so no policy injects or routes the pods this SidecarSet selects "+
			"(they are created without its sidecars): delete that object or rename this SidecarSet", st.Blocked)
	case !st.InForce:
		c.Reason = "Pending"
		c.Message = fmt.Sprintf("MutatingAdmissionPolicy %s is written, and the API server was not yet seen running it "+
			"(a pod created now may get no sidecar): %s", name, st.Pending)
	case st.Unsupported != nil:
		c.Reason = "Unsupported"
		c.Message = fmt.Sprintf("every pod this SidecarSet selects is injected by the webhook: %s (%s)", st.Unsupported.Field, st.Unsupported.Reason)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, "Compiled"
		c.Message = fmt.Sprintf("MutatingAdmissionPolicy %s injects the pods this SidecarSet alone selects; the webhook those that another SidecarSet also selects, that carry a record or that clash with a sidecar", name)
	}
	return c
}
