package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/operator"
	ourwebhook "github.com/sidecarset/sidecarset-operator/internal/webhook"
)

// TestMirrorPodsAreNeverInjected: a mirror pod (the API object the kubelet creates for a
// static pod, which it runs from the manifest on its node) is admitted unchanged and counted as
// excluded, while the same pod without the mirror annotation is injected. An admin may create
// a pod with the annotation (the API server restricts mirror pods only for nodes, through
// NodeRestriction), so it goes through the real admission chain here.
func TestMirrorPodsAreNeverInjected(t *testing.T) {
	ns := newNamespace(t, nil)
	set := agentSet("mirror", "static")
	// A mirror pod may not reference a ConfigMap: with the sample's config volume, injecting it
	// gets it refused by the ServiceAccount plugin rather than stored with sidecars.
	set.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	createSet(t, set)
	skipped := func() float64 {
		return metricSum(t, "sidecarset_pod_admissions_total", "result", "skipped", "reason", "MirrorPod")
	}
	before := skipped()

	mirror := appPod(ns, "static-0", "static", true)
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "3c9a1f2e"}
	mirror.Spec.NodeName = "node-1" // the API server requires it of mirror pods
	must(t, k8s.Create(ctx, mirror))
	got := getPod(t, mirror)
	if names := containerNames(got.Spec.Containers); !slices.Equal(names, []string{"app"}) || got.Annotations[appsv1alpha1.StatusAnnotation] != "" {
		t.Errorf("mirror pod was injected: containers %v, annotations %v", names, got.Annotations)
	}
	if moved := skipped() - before; moved != 1 {
		t.Errorf(`admissions{result="skipped",reason="MirrorPod"} moved by %v, want 1`, moved)
	}

	// The same pod, not a mirror pod, is injected: the set does select it.
	plain := appPod(ns, "static-1", "static", true)
	must(t, k8s.Create(ctx, plain))
	if names := containerNames(getPod(t, plain).Spec.Containers); !slices.Equal(names, []string{"app", "mirror-agent"}) {
		t.Errorf("containers of the plain pod = %v, want [app mirror-agent]", names)
	}
	eventually(t, "status to count the mirror pod as excluded", func() (bool, string) {
		var s appsv1alpha1.SidecarSet
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &s); err != nil {
			return false, err.Error()
		}
		return s.Status.MatchedPods == 1 && s.Status.ExcludedPods == 1,
			fmt.Sprintf("matched %d, excluded %d", s.Status.MatchedPods, s.Status.ExcludedPods)
	})
}

// TestPodsCreatedWithTheirNamespaceAreAdmitted: pods created right after their namespace, as
// one apply does, are injected, not refused while the manager's cache has not seen the
// namespace. Here the informer seldom lags (each pod waits for its namespace's ServiceAccount
// to be created first, which the ServiceAccount plugin requires), so the miss is also forced:
// the injector's lookup with a cache that has not seen the namespace, against the API server
// as the manager's ServiceAccount (the RBAC config/default grants must allow the read).
func TestPodsCreatedWithTheirNamespaceAreAdmitted(t *testing.T) {
	createSet(t, agentSet("fresh-ns", "fresh"))
	// Many at once, as a GitOps sync of many namespaces does: the informer falls behind.
	const n = 20
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-fresh-", Labels: map[string]string{"team": "fresh"}}}
			if err := k8s.Create(ctx, ns); err != nil {
				errs <- err
				return
			}
			t.Cleanup(func() { deleteIgnoreNotFound(t, ns) })
			if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "default"}}); err != nil {
				errs <- err
				return
			}
			pod := appPod(ns.Name, "fresh-0", "fresh", true)
			if err := k8s.Create(ctx, pod); err != nil {
				errs <- fmt.Errorf("creating a pod right after its namespace: %w", err)
				return
			}
			if names := containerNames(pod.Spec.Containers); !slices.Equal(names, []string{"app", "fresh-ns-agent"}) {
				errs <- fmt.Errorf("pod %s/%s: containers %v, want [app fresh-ns-agent]", ns.Name, pod.Name, names)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	managerCfg, err := asManagerServiceAccount(ctx, adminConfig, filepath.Join(manifestsDir, "default.yaml"))
	must(t, err)
	scheme, err := operator.NewScheme()
	must(t, err)
	live, err := client.New(managerCfg, client.Options{Scheme: scheme})
	must(t, err)
	ns := newNamespace(t, map[string]string{"team": "fresh"})
	labels, err := ourwebhook.NamespaceLabelsFrom(notCachedYet{}, live)(ctx, ns)
	if err != nil || labels["team"] != "fresh" {
		t.Errorf("labels of a namespace the cache has not seen = %v, %v; want team=fresh from the API server", labels, err)
	}
}

// notCachedYet is a cache that has not seen any namespace yet, as the manager's informer in the
// moment after a namespace is created.
type notCachedYet struct{ client.Reader }

func (notCachedYet) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, key.Name)
}

// TestDryRunAdmissionRecordsNoEvent: the pod webhook declares sideEffects: None, so a dry-run
// creation (kubectl apply --dry-run=server) of a pod whose sidecar breaks the namespace's Pod
// Security Standard records no event on the SidecarSet, while the same creation for real does.
func TestDryRunAdmissionRecordsNoEvent(t *testing.T) {
	ns := newNamespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	set := agentSet("dry-run-agent", "dry")
	set.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	createSet(t, set)
	dry := appPod(ns, "dry-0", "dry", true)
	restricted(&dry.Spec.Containers[0])
	if err := k8s.Create(ctx, dry, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("dry-run creation: %v; want PodSecurity's refusal", err)
	}

	// The real creation's event comes through the same recorder after the dry run's would have.
	created := appPod(ns, "real-0", "dry", true)
	restricted(&created.Spec.Containers[0])
	if err := k8s.Create(ctx, created); !apierrors.IsForbidden(err) {
		t.Fatalf("creation: %v; want PodSecurity's refusal", err)
	}
	waitForSetEvent(t, set, "ViolatesPodSecurity", "a pod of namespace "+ns)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		var list eventsv1.EventList
		must(t, k8s.List(ctx, &list))
		for _, e := range list.Items {
			if e.Regarding.Kind == "SidecarSet" && e.Regarding.Name == set.Name && (strings.Contains(e.Note, "-0") || e.Series != nil) {
				// The set's event names no pod; a second one (the dry run's) makes a series.
				t.Fatalf("the event names a pod, or one was recorded for the dry run: %s: %s (series %v)", e.Reason, e.Note, e.Series)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}
