package rollout

import (
	"errors"
	"strings"
	"testing"

	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
)

// TestPlanInPlace: whether a running Pod takes the set's current spec in place, and when not,
// why and whether recreating it would apply the change.
func TestPlanInPlace(t *testing.T) {
	v1 := agentSet(t, "1", "")
	pod := injectedBy(t, v1)
	on := func(node string) podtest.Opt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
	kubelets := func(node string) (*version.Version, error) {
		switch node {
		case "old":
			return version.MustParseGeneric("1.31.4"), nil
		case "broken":
			return nil, errors.New("reading node broken: forbidden")
		}
		return version.MustParseGeneric("1.33.0"), nil
	}
	env := InPlaceEnv{Revisions: true, Resize: true, KubeletVersion: kubelets}
	tests := []struct {
		name     string
		set      *inject.CompiledSet
		pod      *corev1.Pod
		injected *inject.CompiledSet
		env      InPlaceEnv
		// want: "in place", or the refusal's why (a part of it) and whether it is recreatable.
		want        string
		recreatable bool
		err         bool
	}{
		{"current", v1, pod, v1, env, "in place", false, false},
		{"new images", agentSet(t, "2", ""), pod, v1, env, "in place", false, false},
		{"a changed env only recreation applies", agentSet(t, "1", "debug"), pod, v1, env, "env", true, false},
		{"without the injected revision, left alone", agentSet(t, "2", ""), pod, nil, env, "(log-agent-", false, false},
		{"without revisions stored at all", agentSet(t, "2", ""), pod, nil, InPlaceEnv{Resize: true}, "stores no revisions", false, false},
		{"new resources without pods/resize", withResources(t, agentSet(t, "1", "")), pod, v1, InPlaceEnv{Revisions: true}, NoResize, true, false},
		{"new resources with pods/resize", withResources(t, agentSet(t, "1", "")), pod, v1, env, "in place", false, false},
		{"a native sidecar's image on an old kubelet", agentSet(t, "2", ""), with(pod, on("old")), v1, env, "kubelet v1.31.4", true, false},
		{"a native sidecar's image on a new kubelet", agentSet(t, "2", ""), with(pod, on("new")), v1, env, "in place", false, false},
		{"a kubelet that cannot be read", agentSet(t, "2", ""), with(pod, on("broken")), v1, env, "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := snapshot.NewStore()
			store.Upsert(tt.set.Set)
			u, no, err := PlanInPlace(store.Load(), tt.set, tt.pod, nil, tt.injected, tt.env)
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want one: %v", err, tt.err)
			}
			got := "in place"
			if u == nil {
				got = no.Why
			}
			if !strings.Contains(got, tt.want) || (tt.want == "" && got != "") || no.Recreatable != tt.recreatable {
				t.Errorf("PlanInPlace = %q (recreatable %v), want %q (recreatable %v)", got, no.Recreatable, tt.want, tt.recreatable)
			}
		})
	}
}

// agentSet is a set with a native sidecar (proxy) and a sidecar (log-agent) at the image
// version, with env DEBUG=debug when debug is set.
func agentSet(t *testing.T, image, debug string) *inject.CompiledSet {
	return podtest.Set(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "registry.example/log-agent:" + image
		if debug != "" {
			s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DEBUG", Value: debug}}
		}
		s.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy",
			Image: "registry.example/proxy:" + image, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}}
		s.Spec.UpdateStrategy.Type = appsv1alpha1.RollingUpdate
	})
}

func withResources(t *testing.T, c *inject.CompiledSet) *inject.CompiledSet {
	set := c.Set.DeepCopy()
	set.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	out, err := inject.Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// injectedBy is an app Pod as the set injects it.
func injectedBy(t *testing.T, c *inject.CompiledSet) *corev1.Pod {
	pod := podtest.Pod(func(p *corev1.Pod) {
		p.Name, p.ResourceVersion = "a", "1"
		// Burstable: new sidecar requests keep its QoS class, so in-place resize can apply them.
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	})
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: []*inject.CompiledSet{c}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Pod()
}

func with(pod *corev1.Pod, opts ...podtest.Opt) *corev1.Pod {
	out := pod.DeepCopy()
	for _, o := range opts {
		o(out)
	}
	return out
}

// TestPlanInPlacePolicyResize: a pod with the set's current hash whose app container was
// resized gets its resourcesPolicy sidecar resized in place (its injected revision is not
// needed: no image changes), unless the API server has no pods/resize.
func TestPlanInPlacePolicyResize(t *testing.T) {
	set := podtest.Set(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Type = appsv1alpha1.RollingUpdate
		s.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
			Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"}}}
	})
	resizedApp := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}
	}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		env         InPlaceEnv
		wantResized string // the sidecar's new cpu request, "" when none
		wantWhy     string
	}{
		{"nothing resized", injectedBy(t, set), InPlaceEnv{Resize: true}, "", ""},
		{"the app resized", with(injectedBy(t, set), resizedApp), InPlaceEnv{Resize: true}, "150m", ""},
		{"the app resized, no pods/resize", with(injectedBy(t, set), resizedApp), InPlaceEnv{}, "", NoResize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := snapshot.NewStore()
			store.Upsert(set.Set)
			u, no, err := PlanInPlace(store.Load(), set, tc.pod, nil, nil, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if no.Why != tc.wantWhy {
				t.Fatalf("refusal %q, want %q", no.Why, tc.wantWhy)
			}
			if tc.wantWhy != "" {
				return
			}
			got := ""
			if len(u.Resources) == 1 {
				got = u.Resources[0].To.Requests.Cpu().String()
			}
			if got != tc.wantResized || len(u.Resources) > 1 || !u.Current() {
				t.Errorf("Resources = %+v (current %v), want the sidecar's cpu request %q", u.Resources, u.Current(), tc.wantResized)
			}
		})
	}
}
