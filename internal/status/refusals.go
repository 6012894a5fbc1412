package status

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// NoRecentRefusals is the reason of a False Refusing condition.
const NoRecentRefusals = "NoRecentRefusals"

// WithRefusals sets the Refusing condition into conditions from what the operator's replicas
// wrote into status.refusals, and returns the entries to keep: those whose latest refusal is
// within quiet of now and made under the set's current generation (others are dropped, and the
// condition turns False: the spec that was refused has changed). The condition is
// left out for a set that has not refused a pod since it last said so (nothing in previous or
// refusals). next is when the condition changes by itself (zero: never): the status is looked
// at again then.
func WithRefusals(conditions *[]metav1.Condition, previous []metav1.Condition, refusals []appsv1alpha1.ReplicaRefusals,
	generation int64, now time.Time, quiet time.Duration) (kept []appsv1alpha1.ReplicaRefusals, next time.Duration) {
	for _, r := range refusals {
		// A refusal under an older spec says nothing of this one (0: written before entries
		// recorded their generation).
		if now.Sub(r.Last.Time) <= quiet && (r.Generation == 0 || r.Generation == generation) {
			kept = append(kept, r)
		}
	}
	was := meta.FindStatusCondition(previous, appsv1alpha1.ConditionRefusing)
	if len(kept) == 0 {
		if was != nil {
			setKeepingTime(conditions, was, metav1.Condition{Type: appsv1alpha1.ConditionRefusing, Status: metav1.ConditionFalse,
				Reason: NoRecentRefusals, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
				Message: fmt.Sprintf("The pod webhook refused no pod this SidecarSet selects in the last %s, nor since its spec last changed", quiet)})
		}
		return nil, 0
	}
	latest := kept[0]
	if latest.Reason == "" {
		latest.Reason = "Refused"
	}
	var count int64
	since := kept[0].Since
	var namespaces, workloads []string
	for _, r := range kept {
		count += r.Count
		if r.Last.After(latest.Last.Time) {
			latest = r
		}
		if r.Since.Before(&since) {
			since = r.Since
		}
		namespaces = appendNew(namespaces, r.Namespaces...)
		workloads = appendNew(workloads, r.Workloads...)
	}
	msg := fmt.Sprintf("The pod webhook refused %d pod(s) this SidecarSet selects since %s, the latest at %s: %s; namespaces: %s",
		count, since.UTC().Format(time.RFC3339), latest.Last.UTC().Format(time.RFC3339), latest.Message, strings.Join(namespaces, ", "))
	if len(workloads) > 0 {
		msg += "; workloads: " + strings.Join(workloads, ", ")
	}
	setKeepingTime(conditions, was, metav1.Condition{Type: appsv1alpha1.ConditionRefusing, Status: metav1.ConditionTrue,
		Reason: latest.Reason, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now), Message: msg})
	// "No pod matches" would send the set's owner looking at labels: the pods matched, and
	// were refused.
	for i := range *conditions {
		if c := &(*conditions)[i]; c.Reason == "NoMatchedPods" {
			c.Message = fmt.Sprintf("No pod runs with this SidecarSet's sidecars: the pod webhook refused %d pod(s) it selects (%s); see the Refusing condition", count, latest.Reason)
		}
	}
	next = quiet
	for _, r := range kept {
		next = min(next, r.Last.Add(quiet).Sub(now)+time.Second)
	}
	return kept, next
}

// setKeepingTime sets c, keeping the transition time of was when its status is the same.
func setKeepingTime(conditions *[]metav1.Condition, was *metav1.Condition, c metav1.Condition) {
	if was != nil && was.Status == c.Status {
		c.LastTransitionTime = was.LastTransitionTime
	}
	meta.RemoveStatusCondition(conditions, c.Type)
	*conditions = append(*conditions, c)
}

// appendNew appends the values list does not hold yet, up to ten in all.
func appendNew(list []string, values ...string) []string {
	for _, v := range values {
		if len(list) < 10 && !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}
