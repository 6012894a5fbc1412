// Package eventcatalog is the one list of the events the operator writes: each reason with its
// type and what it means. The type follows from the reason, never from the call site: Normal
// for progress a team need not act on, Warning only for what needs a person (a pod refused, a
// rollout halted, a pod the rollout cannot update, a set that cannot be used). Teams page on
// Warning events, so a routine rollout writes none. docs/operations.md carries the same table
// (TestCatalogDocumented). Every event is recorded through Recorder, which takes the type from
// the catalog and records nothing for a dry run; reasons are the typed constants below.
package eventcatalog

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Reason is the reason of an event the operator writes: one of the catalog's.
type Reason string

// The reasons of the catalog, as the operator writes them.
const (
	Injecting                Reason = "Injecting"
	InjectionPaused          Reason = "InjectionPaused"
	RollingUpdateProgressing Reason = "RollingUpdateProgressing"
	RollingUpdatePaused      Reason = "RollingUpdatePaused"
	PolicyPending            Reason = "PolicyPending"
	PodsNotUpdatable         Reason = "PodsNotUpdatable"
	RollingUpdateHalted      Reason = "RollingUpdateHalted"
	Invalid                  Reason = "Invalid"
	StoppedByConflict        Reason = "StoppedByConflict"
	PolicyNameTaken          Reason = "PolicyNameTaken"
	PodsExcluded             Reason = "PodsExcluded"
	PodRefused               Reason = "PodRefused"
	ViolatesPodSecurity      Reason = "ViolatesPodSecurity"
	PodEventsCapped          Reason = "PodEventsCapped"
	SidecarUpdated           Reason = "SidecarUpdated"
	PodEvicted               Reason = "PodEvicted"
	PodNotUpdatable          Reason = "PodNotUpdatable"
	RolloutHalted            Reason = "RolloutHalted"
	ResolvingImages          Reason = "ResolvingImages"
	ImageResolutionFailed    Reason = "ImageResolutionFailed"
	ImageTagMoved            Reason = "ImageTagMoved"
	ImageVerificationFailed  Reason = "ImageVerificationFailed"
	ImageVerified            Reason = "ImageVerified"
	ImagesNotVerified        Reason = "ImagesNotVerified"
)

// Event is one reason the operator writes events under.
type Event struct {
	// Reason is the event's reason.
	Reason Reason
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Regarding is the kind of object the event is about: SidecarSet or Pod.
	Regarding string
	// Meaning says when it is written.
	Meaning string
}

// Events is the catalog, in the order of docs/operations.md's table.
var Events = []Event{
	{Injecting, corev1.EventTypeNormal, "SidecarSet", "Ready turned True: the set injects new matching pods and has no rolling update left"},
	{InjectionPaused, corev1.EventTypeNormal, "SidecarSet", "Ready's reason: injection is paused by spec.injectionStrategy.paused"},
	{RollingUpdateProgressing, corev1.EventTypeNormal, "SidecarSet", "a rolling update of running pods started"},
	{RollingUpdatePaused, corev1.EventTypeNormal, "SidecarSet", "the rolling update is paused by spec.updateStrategy.paused"},
	{PolicyPending, corev1.EventTypeNormal, "SidecarSet", "policy mode: the set's MutatingAdmissionPolicy is not yet in force"},
	{PodsNotUpdatable, corev1.EventTypeWarning, "SidecarSet", "outdated pods cannot take the change in place and are not recreated (each gets PodNotUpdatable)"},
	{RollingUpdateHalted, corev1.EventTypeWarning, "SidecarSet", "the rollout halted: pods it recreated are not available by the progress deadline"},
	{Invalid, corev1.EventTypeWarning, "SidecarSet", "the set cannot be used (written while the validating webhook was down) and injects nothing"},
	{StoppedByConflict, corev1.EventTypeWarning, "SidecarSet", "the set injects nothing while it conflicts with an older set"},
	{PolicyNameTaken, corev1.EventTypeWarning, "SidecarSet", "policy mode: an object the operator did not write has the name of the set's policy"},
	{PodsExcluded, corev1.EventTypeWarning, "SidecarSet", "pods the set selects are in namespaces that are never injected"},
	{PodRefused, corev1.EventTypeWarning, "SidecarSet", "the pod webhook refused pods the set selects (at most once a minute per replica)"},
	{ViolatesPodSecurity, corev1.EventTypeWarning, "SidecarSet", "the set's sidecars make a pod break its namespace's enforced Pod Security Standard"},
	{ResolvingImages, corev1.EventTypeNormal, "SidecarSet", "Ready's reason: a set pinning digests has images not resolved yet; new pods keep its last revision"},
	{ImageResolutionFailed, corev1.EventTypeWarning, "SidecarSet", "the operator could not read an image's digest from its registry (the image, the credentials or the registry); retried with backoff"},
	{ImageTagMoved, corev1.EventTypeNormal, "SidecarSet", "a pinned image's tag names another digest now; pods keep the pinned one until the set's images are refreshed"},
	{ImageVerificationFailed, corev1.EventTypeWarning, "SidecarSet", "a pinned digest carries no signature by a signer the set trusts (spec.imagePolicy.verify); new pods keep the last revision whose images verified; retried with backoff"},
	{ImageVerified, corev1.EventTypeNormal, "SidecarSet", "a pinned digest's signature verified: pods may get it"},
	{ImagesNotVerified, corev1.EventTypeNormal, "SidecarSet", "Ready's reason: a set verifying signatures has a pinned digest not verified; new pods keep the last revision whose images verified"},
	{PodEventsCapped, corev1.EventTypeNormal, "SidecarSet", "past 100 SidecarUpdated events for one revision, the rest of the pods update quietly"},
	{SidecarUpdated, corev1.EventTypeNormal, "Pod", "the rollout updated the pod's sidecars in place"},
	{PodEvicted, corev1.EventTypeNormal, "Pod", "the rollout evicted the pod so that its controller recreates it with the current sidecars"},
	{PodNotUpdatable, corev1.EventTypeWarning, "Pod", "the rollout cannot update the pod's sidecars in place, and says why"},
	{RolloutHalted, corev1.EventTypeWarning, "Pod", "the pod, recreated by the rollout, is not available by the progress deadline: the rollout halts"},
}

// Type is the type of events of that reason: Warning for a reason the catalog does not hold,
// so that an event nobody classified is seen.
func Type(reason string) string {
	for _, e := range Events {
		if string(e.Reason) == reason {
			return e.Type
		}
	}
	return corev1.EventTypeWarning
}

// Known reports whether the catalog holds the reason.
func Known(reason string) bool {
	for _, e := range Events {
		if string(e.Reason) == reason {
			return true
		}
	}
	return false
}

// Recorder is the one way the operator records an event: the type comes from the catalog, and
// nothing is recorded without a recorder or for a dry run (a dry-run admission request must
// leave nothing behind, events included).
type Recorder struct {
	// To records the events; none when nil.
	To events.EventRecorder
	// DryRun is true while serving a dry-run request: nothing is recorded.
	DryRun bool
}

// Record records an event of reason about obj, with the catalog's type for it.
func (r Recorder) Record(obj runtime.Object, reason Reason, action, format string, args ...any) {
	if r.To == nil || r.DryRun {
		return
	}
	r.To.Eventf(obj, nil, Type(string(reason)), string(reason), action, format, args...)
}
