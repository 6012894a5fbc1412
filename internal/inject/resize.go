package inject

import (
	"fmt"

	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"

	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// ResizeRefusal says why the update's new requests and limits cannot be applied to the
// running Pod through in-place resize, where Kubernetes is known to refuse or never apply
// them; empty when they can (or when nothing is resized). Known refusals are reported up front
// rather than sent to the API server again on every rollout pass:
//   - a plain init container (not a native sidecar) has run to completion: its resources
//     change only when the Pod is recreated;
//   - in-place resize never changes a Pod's QoS class (BestEffort, Burstable, Guaranteed);
func (u *InPlace) ResizeRefusal() string {
	if len(u.Resources) == 0 || len(u.Blocked) > 0 {
		return ""
	}
	after := u.pod.DeepCopy()
	for _, c := range u.Resources {
		list := after.Spec.Containers
		if c.Init {
			list = after.Spec.InitContainers
			if !podrules.NativeSidecar(&list[c.Index]) {
				return fmt.Sprintf("init container %s is not a native sidecar (restartPolicy Always): its resources change only when the pod is recreated", c.Name)
			}
		}
		list[c.Index].Resources = c.To
	}
	if from, to := qos.ComputePodQOS(u.pod), qos.ComputePodQOS(after); from != to {
		return fmt.Sprintf("the new requests and limits would change the pod's QoS class from %s to %s, which in-place resize cannot do; recreate the pod to apply them", from, to)
	}
	return ""
}
