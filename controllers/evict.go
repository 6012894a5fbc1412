package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset-operator/internal/eventcatalog"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
)

// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=apps,resources=replicasets;statefulsets;daemonsets,verbs=get
// +kubebuilder:rbac:groups="",resources=replicationcontrollers,verbs=get

// errDisruptionBudget means a PodDisruptionBudget allows no eviction now: the Pod waits.
var errDisruptionBudget = errors.New("its PodDisruptionBudget allows no disruption now")

// evict asks the API server to evict pod (PodDisruptionBudgets hold) once its controller is
// known to exist and not to be going away. why is set when the Pod is not to be evicted at
// all; errDisruptionBudget when it must wait.
func (r *RolloutReconciler) evict(ctx context.Context, c *inject.CompiledSet, pod *corev1.Pod) (why string, err error) {
	owner, noController := rollout.RecreatingController(pod)
	if owner == nil {
		return noController, nil
	}
	if why, err := r.ownerGoingAway(ctx, pod.Namespace, owner); why != "" || err != nil {
		return why, err
	}
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}}
	// The API server retries an eviction while the budget's status is being written: a slow
	// answer must not hold up the rest of the rollout.
	evictCtx, cancel := context.WithTimeout(ctx, evictionTimeout)
	defer cancel()
	err = r.Client.SubResource("eviction").Create(evictCtx, pod, eviction)
	switch {
	case err == nil:
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return "", errStale // gone, or another Pod by that name now: looked at again
	case apierrors.IsTooManyRequests(err):
		return "", errDisruptionBudget
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
		return fmt.Sprintf("the API server refused the eviction: %v", err), nil
	default:
		return "", fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	reason := "outdated"
	if _, injected := inject.InjectedHash(pod.Annotations, c.Name()); !injected {
		reason = "not_injected"
	}
	r.Metrics.Evictions.WithLabelValues(c.Name(), reason).Inc()
	eventcatalog.Recorder{To: r.Recorder}.Record(pod, eventcatalog.PodEvicted, "Evict",
		"SidecarSet %s evicted the pod so that its %s %s recreates it with the current sidecars (%s)", c.Name(), owner.Kind, owner.Name,
		map[string]string{"outdated": "its sidecars cannot change in place", "not_injected": "it never got them"}[reason])
	return "", nil
}

// ownerGoingAway says why a Pod's controller will not recreate it: it is gone or being deleted.
func (r *RolloutReconciler) ownerGoingAway(ctx context.Context, namespace string, owner *metav1.OwnerReference) (string, error) {
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return fmt.Sprintf("its controller's apiVersion %q cannot be read", owner.APIVersion), nil //nolint:nilerr // a malformed owner reference is why the pod is left, not a reconcile error
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gv.WithKind(owner.Kind))
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: owner.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("its controller, %s %s, is gone", owner.Kind, owner.Name), nil
		}
		return "", fmt.Errorf("reading the controller of a pod in %s: %w", namespace, err)
	}
	switch {
	case obj.UID != owner.UID:
		return fmt.Sprintf("its controller, %s %s, is gone (another object has its name)", owner.Kind, owner.Name), nil
	case obj.DeletionTimestamp != nil:
		return fmt.Sprintf("its controller, %s %s, is being deleted", owner.Kind, owner.Name), nil
	}
	return "", nil
}

// evictionTimeout bounds one eviction request.
const evictionTimeout = 10 * time.Second

// recreateRetry is how soon a Pod that its PodDisruptionBudget held back is tried again.
const recreateRetry = 5 * time.Second
