package webhook

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// heardRefusal is one call of a RefusalRecorder.
type heardRefusal struct {
	set                        string
	reason                     inject.Reason
	message, namespace, worker string
}

type refusalLog []heardRefusal

func (l *refusalLog) Refused(set *appsv1alpha1.SidecarSet, reason inject.Reason, message, namespace, workload string) {
	*l = append(*l, heardRefusal{set.Name, reason, message, namespace, workload})
}

// TestRefusalsAreRecordedForTheSet: a pod the engine refuses because of a set is told to the
// RefusalRecorder with the set, the catalog reason, the message the pod's creator reads, the
// namespace and the pod's controller; a dry run and an injected pod are not.
func TestRefusalsAreRecordedForTheSet(t *testing.T) {
	clash := optedInPod("web", nil, corev1.Container{Name: "log-agent", Image: "mine:1"})
	clash.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "shop-5d8f", UID: "u1", Controller: ptr.To(true)}}
	bare := optedInPod("web", nil, corev1.Container{Name: "log-agent", Image: "mine:1"})
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		dryRun bool
		want   []heardRefusal
	}{
		{"refused, a ReplicaSet's pod", clash, false, []heardRefusal{{"log-agent", inject.ReasonContainerClash, "", "web", "web/ReplicaSet/shop-5d8f"}}},
		{"refused, a bare pod", bare, false, []heardRefusal{{"log-agent", inject.ReasonContainerClash, "", "web", ""}}},
		{"refused, a dry run", clash, true, nil},
		{"injected", optedInPod("web", nil), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testInjector(t)
			var heard refusalLog
			h.Refusals = &heard
			req := rawRequest(t, mustMarshal(t, tc.pod), "web")
			req.DryRun = ptr.To(tc.dryRun)
			resp := handle(t, h, req)
			if len(heard) != len(tc.want) {
				t.Fatalf("heard %+v; want %+v", heard, tc.want)
			}
			for i, w := range tc.want {
				got := heard[i]
				if got.set != w.set || got.reason != w.reason || got.namespace != w.namespace || got.worker != w.worker || got.message != resp.Result.Message {
					t.Errorf("heard %+v; want %+v with the denial's message %q", got, w, resp.Result.Message)
				}
			}
		})
	}
}

// TestNamespaceReadNeverBlocksUnselectedPods: the namespace is read only for a pod some set
// may inject; an opted-in pod no set selects is let through even while namespaces cannot be
// read, and a selected one gets the error.
func TestNamespaceReadNeverBlocksUnselectedPods(t *testing.T) {
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		allowed bool
	}{
		{"no set selects it", map[string]string{"app": "other"}, true},
		{"a set selects it", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testInjector(t)
			h.NamespaceLabels = namespaceLabels(nil, errors.New("the API server is unreachable"))
			resp := handle(t, h, rawRequest(t, mustMarshal(t, optedInPod("web", tc.labels)), "web"))
			if resp.Allowed != tc.allowed {
				t.Errorf("allowed %v (%s); want %v", resp.Allowed, resp.Result.Message, tc.allowed)
			}
		})
	}
}
