package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
)

// progress is what an answer of Ready tells kstatus (and so Flux, and Argo CD through
// config/argocd/health.lua): whether the operator is still at work, cannot go on without a
// person, or neither.
type progress int

const (
	// settled: nothing is left that the operator does by itself: Ready is True, or the set
	// waits because its spec says so (a paused rollout). Reconciling and Stalled are False.
	settled progress = iota + 1
	// reconciling: Ready is False for a reason that clears without a person. Reconciling is True.
	reconciling
	// stalled: the set makes no progress until a person acts. Stalled is True.
	stalled
)

// readiness is one answer of the Ready condition: its status, its reason and its progress.
// Every answer is one of the variables below, written unkeyed so that an answer without a
// progress does not compile; Ready is written only by setReady, from one of them. An answer
// that readinesses leaves out fails TestReadyIsWrittenOnlyBySetReady, one that the table of
// TestReadinessesClassified leaves out fails that test.
type readiness struct {
	status   metav1.ConditionStatus
	reason   string
	progress progress
}

// The answers of Ready.
var (
	readyInjecting       = readiness{metav1.ConditionTrue, "Injecting", settled}
	readyInjectionPaused = readiness{metav1.ConditionTrue, "InjectionPaused", settled}
	// Paused by spec.updateStrategy.paused: the set does what it was told, so it is not
	// Reconciling (Ready stays False: the rolling update is not done).
	readyRollingUpdatePaused      = readiness{metav1.ConditionFalse, "RollingUpdatePaused", settled}
	readyRollingUpdateProgressing = readiness{metav1.ConditionFalse, "RollingUpdateProgressing", reconciling}
	// The image resolver retries with backoff until the registry answers.
	readyResolvingImages = readiness{metav1.ConditionFalse, ReadyResolvingImages, reconciling}
	// A signature not verified yet; readyImagesVerificationFailed once one failed.
	readyImagesVerifying = readiness{metav1.ConditionFalse, ReadyImagesNotVerified, reconciling}
	readyPolicyPending   = readiness{metav1.ConditionFalse, "PolicyPending", reconciling}
	readyInvalid         = readiness{metav1.ConditionFalse, "Invalid", stalled}
	// Stays until someone resolves the conflict (renames, equal definitions, disjoint selectors).
	readyStoppedByConflict = readiness{metav1.ConditionFalse, "StoppedByConflict", stalled}
	// Outdated pods that only their recreation, by a person, updates.
	readyPodsNotUpdatable = readiness{metav1.ConditionFalse, "PodsNotUpdatable", stalled}
	// The rollout starts nothing until the spec changes (HaltSummary).
	readyRollingUpdateHalted = readiness{metav1.ConditionFalse, "RollingUpdate" + rollout.HaltedReason, stalled}
	// A digest with no signature the set trusts: someone signs it or changes the policy.
	readyImagesVerificationFailed = readiness{metav1.ConditionFalse, ReadyImagesNotVerified, stalled}
	// An object the operator did not write holds the policy's name.
	readyPolicyNameTaken = readiness{metav1.ConditionFalse, "PolicyNameTaken", stalled}
)

// readinesses lists every answer of Ready.
var readinesses = []readiness{
	readyInjecting, readyInjectionPaused, readyRollingUpdatePaused, readyRollingUpdateProgressing,
	readyResolvingImages, readyImagesVerifying, readyPolicyPending, readyInvalid, readyStoppedByConflict,
	readyPodsNotUpdatable, readyRollingUpdateHalted, readyImagesVerificationFailed, readyPolicyNameTaken,
}

// readyByRollingReason is Ready's answer for each reason of the RollingUpdate condition that
// leaves running pods outdated.
var readyByRollingReason = map[string]readiness{
	"Progressing":        readyRollingUpdateProgressing,
	"Paused":             readyRollingUpdatePaused,
	"PodsNotUpdatable":   readyPodsNotUpdatable,
	rollout.HaltedReason: readyRollingUpdateHalted,
}

// setReady sets Ready to the answer r with message and, from the same answer, kstatus's
// Reconciling and Stalled (see appsv1alpha1.ConditionReconciling). Both are written False
// rather than left out, as kstatus allows (it reads only a True one): a False one's transition
// time says since when nothing is in progress, and `kubectl wait
// --for=condition=Reconciling=false` needs the condition. previous are the conditions the
// status held: each of the three keeps its transition time while its status stays, and gets
// now when it changes. Conditions keep their place in the list.
func setReady(conditions *[]metav1.Condition, previous []metav1.Condition, r readiness, message string, generation int64, now metav1.Time) {
	ready := metav1.Condition{Type: appsv1alpha1.ConditionReady, Status: r.status, Reason: r.reason, Message: message}
	busy := metav1.Condition{Type: appsv1alpha1.ConditionReconciling, Status: metav1.ConditionFalse, Reason: r.reason,
		Message: "Nothing in progress: see Ready"}
	stuck := metav1.Condition{Type: appsv1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: r.reason,
		Message: "Nothing needs a person: see Ready"}
	switch r.progress {
	case reconciling:
		busy.Status, busy.Message = metav1.ConditionTrue, message
		stuck.Message = "Making progress: see Reconciling"
	case stalled:
		stuck.Status, stuck.Message = metav1.ConditionTrue, message
		busy.Message = "No progress until a person acts: see Stalled"
	}
	for _, c := range []metav1.Condition{ready, busy, stuck} {
		c.ObservedGeneration, c.LastTransitionTime = generation, now
		keepTransition(&c, previous)
		put(conditions, c)
	}
}

// put replaces the condition of c's type in place, or appends c: unlike
// meta.SetStatusCondition it writes c's transition time as it is.
func put(conditions *[]metav1.Condition, c metav1.Condition) {
	for i := range *conditions {
		if (*conditions)[i].Type == c.Type {
			(*conditions)[i] = c
			return
		}
	}
	*conditions = append(*conditions, c)
}
