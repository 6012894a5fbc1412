package podrules

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func pod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: containers}}
}

func TestValidateCreate(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string // substring of the first error; "" means valid
	}{
		{"valid", pod(corev1.Container{Name: "app", Image: "nginx:1"}), ""},
		{"pull policy", pod(corev1.Container{Name: "app", Image: "nginx:1", ImagePullPolicy: "Sometimes"}),
			"spec.containers[0].imagePullPolicy: Unsupported value"},
		{"host port twice", pod(
			corev1.Container{Name: "a", Image: "x:1", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}},
			corev1.Container{Name: "b", Image: "x:1", Ports: []corev1.ContainerPort{{ContainerPort: 81, HostPort: 80}}}),
			"spec.containers[1].ports[0].hostPort: Duplicate value"},
		// The ServiceAccount admission plugin names the default ServiceAccount first: Istio's
		// istio-token volume is valid in a pod that names none.
		{"projected token, no serviceAccountName", withVolumes(pod(corev1.Container{Name: "app", Image: "x:1"}), tokenVolume()), ""},
		{"projected token and a bad expiry", withVolumes(pod(corev1.Container{Name: "app", Image: "x:1"}), tokenVolume(func(v *corev1.Volume) {
			v.Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = ptr.To[int64](60)
		})), "spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds"},
		{"negative runAsUser", pod(corev1.Container{Name: "app", Image: "x:1",
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](-1)}}),
			"spec.containers[0].securityContext.runAsUser"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.pod.DeepCopy()
			errs := ValidateCreate(tc.pod)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
			} else if len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, errs)
			}
			if !equalPods(in, tc.pod) {
				t.Fatal("ValidateCreate modified its input")
			}
		})
	}
}

func withVolumes(p *corev1.Pod, volumes ...corev1.Volume) *corev1.Pod {
	p.Spec.Volumes = volumes
	return p
}

// tokenVolume is Istio's istio-token volume: a projected ServiceAccount token.
func tokenVolume(edits ...func(*corev1.Volume)) corev1.Volume {
	v := corev1.Volume{Name: "istio-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: "istio-ca", ExpirationSeconds: ptr.To[int64](43200), Path: "istio-token"}}}}}}
	for _, edit := range edits {
		edit(&v)
	}
	return v
}

func equalPods(a, b *corev1.Pod) bool { return a.String() == b.String() }

func TestDefaultedContainer(t *testing.T) {
	c := &corev1.Container{Name: "s", Image: "envoy:1",
		Ports:     []corev1.ContainerPort{{ContainerPort: 15000}},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
	in := c.DeepCopy()
	d := DefaultedContainer(c, false, true)
	if d.ImagePullPolicy != corev1.PullIfNotPresent || d.TerminationMessagePath != corev1.TerminationMessagePathDefault ||
		d.Ports[0].Protocol != corev1.ProtocolTCP || d.Ports[0].HostPort != 15000 {
		t.Fatalf("not defaulted as the API server does: %+v", d)
	}
	if q := d.Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Fatalf("limit not copied to request: %v", d.Resources.Requests)
	}
	if c.String() != in.String() {
		t.Fatal("DefaultedContainer modified its input")
	}
	if d := DefaultedContainer(c, true, false); d.Ports[0].HostPort != 0 {
		t.Fatalf("host port defaulted outside the host network: %+v", d.Ports)
	}
}

func TestDefaultedVolume(t *testing.T) {
	v := &corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}
	d := DefaultedVolume(v)
	if d.ConfigMap.DefaultMode == nil || *d.ConfigMap.DefaultMode != corev1.ConfigMapVolumeSourceDefaultMode {
		t.Fatalf("defaultMode not defaulted: %+v", d.ConfigMap)
	}
	if v.ConfigMap.DefaultMode != nil {
		t.Fatal("DefaultedVolume modified its input")
	}
}

// TestPodResourceErrors: pod-level resources are checked as the API server checks them on
// create, after defaulting pod-level requests from the containers' (so a pod that sets only
// limits is valid as long as its containers fit under them).
func TestPodResourceErrors(t *testing.T) {
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	withResources := func(p *corev1.Pod, r corev1.ResourceRequirements) *corev1.Pod {
		p.Spec.Resources = &r
		return p
	}
	app := func(r corev1.ResourceRequirements) corev1.Container {
		return corev1.Container{Name: "app", Image: "x:1", Resources: r}
	}
	native := corev1.Container{Name: "proxy", Image: "envoy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Resources: corev1.ResourceRequirements{Requests: cpu("300m")}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string // the path of the one error; "" means none
	}{
		{"no pod-level resources", pod(app(corev1.ResourceRequirements{Requests: cpu("2")})), ""},
		{"containers within the requests", withResources(pod(app(corev1.ResourceRequirements{Requests: cpu("500m")})),
			corev1.ResourceRequirements{Requests: cpu("1")}), ""},
		{"containers above the requests", withResources(pod(app(corev1.ResourceRequirements{Requests: cpu("500m")}),
			corev1.Container{Name: "agent", Image: "x:1", Resources: corev1.ResourceRequirements{Requests: cpu("600m")}}),
			corev1.ResourceRequirements{Requests: cpu("1")}), "spec.resources.requests[cpu]"},
		{"a native sidecar counts with the containers", withResources(func() *corev1.Pod {
			p := pod(app(corev1.ResourceRequirements{Requests: cpu("800m")}))
			p.Spec.InitContainers = []corev1.Container{native}
			return p
		}(), corev1.ResourceRequirements{Requests: cpu("1")}), "spec.resources.requests[cpu]"},
		{"a container's limit above the pod's", withResources(pod(app(corev1.ResourceRequirements{Limits: cpu("2")})),
			corev1.ResourceRequirements{Limits: cpu("1")}), "spec.resources"},
		{"only pod limits: requests defaulted from the containers'", withResources(pod(app(corev1.ResourceRequirements{Requests: cpu("500m")})),
			corev1.ResourceRequirements{Limits: cpu("1")}), ""},
		{"only pod limits, containers requesting more", withResources(pod(app(corev1.ResourceRequirements{Requests: cpu("1500m")})),
			corev1.ResourceRequirements{Limits: cpu("1")}), "spec.resources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.pod.DeepCopy()
			errs := PodResourceErrors(tc.pod)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Fatalf("want no error, got %v", errs)
			case tc.want != "" && (len(errs) == 0 || !strings.HasPrefix(errs[0].Field, tc.want)):
				t.Fatalf("want an error at %s, got %v", tc.want, errs)
			}
			if !equalPods(in, tc.pod) {
				t.Fatal("PodResourceErrors modified its input")
			}
		})
	}
}
