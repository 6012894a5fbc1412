package podrules

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func resources(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func limitRange(name string, items ...corev1.LimitRangeItem) corev1.LimitRange {
	return corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.LimitRangeSpec{Limits: items}}
}

// TestLimitRangeDefaulted: every container, regular or init, gets what it leaves unset from
// the first LimitRange that has a default for it; what it sets is kept; the input is not
// modified.
func TestLimitRangeDefaulted(t *testing.T) {
	first := limitRange("first", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Default: resources("cpu", "500m"), DefaultRequest: resources("cpu", "100m", "memory", "64Mi")})
	second := limitRange("second", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Default: resources("cpu", "2", "memory", "1Gi")})
	perPod := limitRange("per-pod", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: resources("memory", "8Gi")})
	for _, tc := range []struct {
		name string
		own  corev1.ResourceRequirements
		lrs  []corev1.LimitRange
		want corev1.ResourceRequirements
	}{
		{name: "nothing set", lrs: []corev1.LimitRange{first, second},
			want: corev1.ResourceRequirements{Requests: resources("cpu", "100m", "memory", "64Mi"), Limits: resources("cpu", "500m", "memory", "1Gi")}},
		{name: "the later LimitRange first", lrs: []corev1.LimitRange{second, first},
			want: corev1.ResourceRequirements{Requests: resources("cpu", "100m", "memory", "64Mi"), Limits: resources("cpu", "2", "memory", "1Gi")}},
		{name: "what the container sets is kept", own: corev1.ResourceRequirements{Requests: resources("cpu", "10m")}, lrs: []corev1.LimitRange{first},
			want: corev1.ResourceRequirements{Requests: resources("cpu", "10m", "memory", "64Mi"), Limits: resources("cpu", "500m")}},
		{name: "a per-pod item gives no default", own: corev1.ResourceRequirements{Limits: resources("memory", "128Mi")}, lrs: []corev1.LimitRange{perPod},
			want: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: resources("memory", "128Mi")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "proxy", Image: "envoy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: *tc.own.DeepCopy()}},
				Containers:     []corev1.Container{{Name: "app", Image: "app:1", Resources: *tc.own.DeepCopy()}},
			}}
			in := pod.DeepCopy()
			got, err := LimitRangeDefaulted(pod, tc.lrs)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
				if c.Resources.String() != tc.want.String() {
					t.Errorf("%s: %v, want %v", c.Name, c.Resources.String(), tc.want.String())
				}
			}
			if got.Spec.InitContainers[0].RestartPolicy == nil {
				t.Error("the native sidecar's restart policy is lost")
			}
			if !equalPods(in, pod) {
				t.Error("LimitRangeDefaulted modified its input")
			}
		})
	}
}

// TestLimitRangeError: the validating pass, per container (regular and init) and on the pod's
// totals, in the plugin's own words.
func TestLimitRangeError(t *testing.T) {
	container := func(r corev1.ResourceRequirements) corev1.Container { return corev1.Container{Name: "c", Resources: r} }
	ratio := limitRange("ratio", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: resources("cpu", "4")})
	podMax := limitRange("pod-max", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: resources("memory", "1Gi")})
	for _, tc := range []struct {
		name string
		lr   corev1.LimitRange
		pod  corev1.PodSpec
		want string // a part of the error; "" for none
	}{
		{name: "within the ratio", lr: ratio,
			pod: corev1.PodSpec{Containers: []corev1.Container{container(corev1.ResourceRequirements{Requests: resources("cpu", "100m"), Limits: resources("cpu", "400m")})}}},
		{name: "no limit under a ratio", lr: ratio,
			pod:  corev1.PodSpec{Containers: []corev1.Container{container(corev1.ResourceRequirements{Requests: resources("cpu", "100m")})}},
			want: "cpu max limit to request ratio per Container is 4, but no limit is specified or limit is 0"},
		{name: "an init container above the ratio", lr: ratio,
			pod:  corev1.PodSpec{InitContainers: []corev1.Container{container(corev1.ResourceRequirements{Requests: resources("cpu", "100m"), Limits: resources("cpu", "1")})}},
			want: "cpu max limit to request ratio per Container is 4, but provided ratio is 10.000000"},
		{name: "totals over the per-pod max", lr: podMax, pod: corev1.PodSpec{Containers: []corev1.Container{
			container(corev1.ResourceRequirements{Limits: resources("memory", "768Mi")}), container(corev1.ResourceRequirements{Limits: resources("memory", "512Mi")})}},
			want: "maximum memory usage per Pod is 1Gi, but limit is 1280Mi"},
		{name: "pod-level resources make the totals", lr: podMax, pod: corev1.PodSpec{Containers: []corev1.Container{
			container(corev1.ResourceRequirements{Limits: resources("memory", "768Mi")}), container(corev1.ResourceRequirements{Limits: resources("memory", "512Mi")})},
			Resources: &corev1.ResourceRequirements{Limits: resources("memory", "1Gi")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := LimitRangeError(&tc.lr, &corev1.Pod{Spec: tc.pod})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestContainerResourceErrors: a default limit below a request the container sets is the
// API server's validation error, at a path relative to the container.
func TestContainerResourceErrors(t *testing.T) {
	if errs := ContainerResourceErrors(corev1.ResourceRequirements{Requests: resources("memory", "128Mi"), Limits: resources("memory", "256Mi")}); len(errs) > 0 {
		t.Errorf("valid resources refused: %v", errs)
	}
	errs := ContainerResourceErrors(corev1.ResourceRequirements{Requests: resources("memory", "512Mi"), Limits: resources("memory", "256Mi")})
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Field, "resources.requests") || !strings.Contains(errs[0].Error(), "must be less than or equal to memory limit of 256Mi") {
		t.Errorf("got %v, want the request above the limit at resources.requests", errs)
	}
}

// TestDefaultedLimitRange: the default limit comes from the maximum, the default request from
// the default limit, as the API server stores a LimitRange; the input is not modified.
func TestDefaultedLimitRange(t *testing.T) {
	lr := limitRange("bounds", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: resources("cpu", "1")})
	got := DefaultedLimitRange(&lr)
	item := got.Spec.Limits[0]
	if q := item.Default[corev1.ResourceCPU]; q.String() != "1" {
		t.Errorf("default limit %v, want the max 1", item.Default)
	}
	if q := item.DefaultRequest[corev1.ResourceCPU]; q.String() != "1" {
		t.Errorf("default request %v, want the default limit 1", item.DefaultRequest)
	}
	if lr.Spec.Limits[0].Default != nil {
		t.Error("DefaultedLimitRange modified its input")
	}
}
