package gitops

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Verdict is what Argo CD and kstatus say of one SidecarSet.
type Verdict struct {
	ArgoCD Health
	// Kstatus is kstatus's status (what Flux's health checks and wait: true wait for), and
	// KstatusMessage its message.
	Kstatus        kstatus.Status
	KstatusMessage string
}

func (v Verdict) String() string {
	return fmt.Sprintf("Argo CD %s (%s), kstatus %s (%s)", v.ArgoCD.Status, v.ArgoCD.Message, v.Kstatus, v.KstatusMessage)
}

// Judge returns both verdicts on obj, a SidecarSet as the API server returns it.
func Judge(obj map[string]any) (Verdict, error) {
	h, err := ArgoCD(obj)
	if err != nil {
		return Verdict{}, fmt.Errorf("running the Argo CD health check: %w", err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return Verdict{}, fmt.Errorf("computing the kstatus status: %w", err)
	}
	return Verdict{ArgoCD: h, Kstatus: res.Status, KstatusMessage: res.Message}, nil
}

// Agree reports whether the two verdicts say the same, by the mapping of docs/gitops.md:
// Healthy and Current; Progressing and InProgress; Degraded and Failed; Suspended and
// Current (injection paused) or InProgress (a paused rolling update: Ready is False, which
// kstatus reads as InProgress when neither Reconciling nor Stalled is True). The one case
// where they do not agree is a set whose status the operator has not written yet: Argo CD
// says Progressing, kstatus Current (it cannot tell a set without status from one that needs none).
func (v Verdict) Agree() bool {
	switch v.ArgoCD.Status {
	case Healthy:
		return v.Kstatus == kstatus.CurrentStatus
	case Progressing:
		return v.Kstatus == kstatus.InProgressStatus
	case Degraded:
		return v.Kstatus == kstatus.FailedStatus
	case Suspended:
		return v.Kstatus == kstatus.CurrentStatus || v.Kstatus == kstatus.InProgressStatus
	}
	return false
}

// Object is set as the API server returns it: its JSON, with its apiVersion and kind, decoded
// into an unstructured object (numbers as int64, as client-go decodes them).
func Object(set *appsv1alpha1.SidecarSet) (map[string]any, error) {
	set = set.DeepCopy()
	set.SetGroupVersionKind(appsv1alpha1.GroupVersion.WithKind("SidecarSet"))
	raw, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	obj, _, err := unstructured.UnstructuredJSONScheme.Decode(raw, nil, nil)
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("decoded a %T, not an object", obj)
	}
	return u.Object, nil
}
