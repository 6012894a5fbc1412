package inject_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestUpdateInPlace injects a pod with a SidecarSet, lets the admission chain add what it adds,
// changes the set, and checks what UpdateInPlace makes of it: image changes are patched (and
// the patched pod is what injecting afresh gives), anything else is blocked by field.
func TestUpdateInPlace(t *testing.T) {
	tokenMount := corev1.VolumeMount{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}
	base := func() *appsv1alpha1.SidecarSet {
		s := webSet("agent", corev1.Container{Name: "agent", Image: "agent:1",
			VolumeMounts: []corev1.VolumeMount{{Name: "agent-config", MountPath: "/etc/agent"}}})
		s.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1",
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}}
		s.Spec.Volumes = []corev1.Volume{{Name: "agent-config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		return s
	}
	tests := []struct {
		name   string
		change func(s *appsv1alpha1.SidecarSet)
		// wantImages are "name:from->to"; wantBlocked are substrings of Blocked, in order;
		// wantResized are "name:requests" after the resize.
		wantImages  []string
		wantBlocked []string
		wantResized []string
	}{
		{"nothing changed", func(*appsv1alpha1.SidecarSet) {}, nil, nil, nil},
		{"regular sidecar image", func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "agent:2" },
			[]string{"agent:agent:1->agent:2"}, nil, nil},
		{"native sidecar and regular sidecar images", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image = "agent:2"
			s.Spec.InitContainers[0].Image = "proxy:2"
		}, []string{"proxy:proxy:1->proxy:2", "agent:agent:1->agent:2"}, nil, nil},
		{"env", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image = "agent:2"
			s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
		}, nil, []string{"spec.containers[agent].env: changed"}, nil},
		{"resources, through resize, keeping what a LimitRange added", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}
		}, nil, nil, []string{"proxy:cpu=50m,memory=64Mi"}},
		{"image and resources", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image = "agent:2"
			s.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
		}, []string{"agent:agent:1->agent:2"}, nil, []string{"agent:cpu=0,memory=128Mi"}},
		{"a new container", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers = append(s.Spec.Containers, appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "metrics", Image: "metrics:1"}})
		}, nil, []string{"spec.containers[metrics]: the SidecarSet now injects this container"}, nil},
		{"a container removed", func(s *appsv1alpha1.SidecarSet) { s.Spec.InitContainers = nil }, nil,
			[]string{"spec.initContainers: the SidecarSet no longer declares container \"proxy\""}, nil},
		{"a volume changed", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Volumes[0].EmptyDir.Medium = corev1.StorageMediumMemory
		}, nil, []string{"spec.volumes[agent-config]: changed"}, nil},
		{"the selector no longer selects the pod", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image = "agent:2"
			s.Spec.Selector.MatchLabels["app"] = "api"
		}, nil, []string{"no longer injects into this pod"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := base()
			res, err := inject.Apply(inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "app:1"}), Sets: compile(t, old)})
			if err != nil {
				t.Fatal(err)
			}
			// What the admission chain adds to every container: a token mount, Always.
			pod := res.Pod()
			pod.ResourceVersion = "42"
			for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
				for i := range list {
					list[i].VolumeMounts = append(list[i].VolumeMounts, tokenMount)
					list[i].ImagePullPolicy = corev1.PullAlways
					list[i].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
				}
			}
			set := base()
			tt.change(set)
			sets := compile(t, set)
			u, err := inject.UpdateInPlace(inject.Input{Pod: pod, Sets: sets}, "agent", nil)
			if err != nil {
				t.Fatal(err)
			}
			var images []string
			for _, c := range u.Images {
				images = append(images, c.Name+":"+c.From+"->"+c.To)
			}
			if strings.Join(images, ",") != strings.Join(tt.wantImages, ",") {
				t.Errorf("Images = %v, want %v", images, tt.wantImages)
			}
			var resized []string
			for _, r := range u.Resources {
				resized = append(resized, fmt.Sprintf("%s:cpu=%s,memory=%s", r.Name, r.To.Requests.Cpu(), r.To.Requests.Memory()))
			}
			if strings.Join(resized, ",") != strings.Join(tt.wantResized, ",") {
				t.Errorf("Resources = %v, want %v", resized, tt.wantResized)
			}
			// Only a change a new pod would be injected with is for recreating the pod.
			if want := len(tt.wantBlocked) > 0 && !strings.Contains(tt.wantBlocked[0], "no longer injects"); u.Recreatable != want {
				t.Errorf("Recreatable = %v, want %v", u.Recreatable, want)
			}
			if len(u.Blocked) != len(tt.wantBlocked) {
				t.Fatalf("Blocked = %q, want %d entries like %q", u.Blocked, len(tt.wantBlocked), tt.wantBlocked)
			}
			for i, want := range tt.wantBlocked {
				if !strings.Contains(u.Blocked[i], want) {
					t.Errorf("Blocked[%d] = %q, want it to contain %q", i, u.Blocked[i], want)
				}
			}
			ops := u.Patch()
			if len(tt.wantBlocked) > 0 || u.Current() {
				if ops != nil {
					t.Errorf("Patch() = %s, want none", mustJSON(t, ops))
				}
				return
			}
			if ops[0].Operation != "test" || ops[0].Path != "/metadata/resourceVersion" || ops[0].Value != "42" {
				t.Errorf("first operation %+v, want a test of resourceVersion 42", ops[0])
			}
			// The patched pod is current: injecting it afresh changes nothing, and it kept
			// what the admission chain added.
			updated := patchedPod(t, pod, append(u.ResizePatch(), ops[1:]...))
			again, err := inject.Apply(inject.Input{Pod: updated, Sets: compile(t, set)})
			if err != nil {
				t.Fatal(err)
			}
			if again.Changed() {
				t.Errorf("the updated pod is not current: Apply would patch %s", mustJSON(t, again.Patch()))
			}
			if hash, _ := inject.InjectedHash(updated.Annotations, "agent"); hash != sets[0].Hash {
				t.Errorf("record hash %q, want the set's %q", hash, sets[0].Hash)
			}
			for _, list := range [][]corev1.Container{updated.Spec.Containers, updated.Spec.InitContainers} {
				for _, c := range list {
					if len(c.VolumeMounts) == 0 || c.VolumeMounts[len(c.VolumeMounts)-1].MountPath != tokenMount.MountPath || c.ImagePullPolicy != corev1.PullAlways {
						t.Errorf("container %s lost what the admission chain added: %+v", c.Name, c)
					}
				}
			}
		})
	}
}

// TestUpdateInPlaceLeavesOtherSetsAlone: another set's outdated sidecar neither blocks the update
// nor is touched by it.
func TestUpdateInPlaceLeavesOtherSetsAlone(t *testing.T) {
	a := webSet("a", corev1.Container{Name: "a", Image: "a:1"})
	b := webSet("b", corev1.Container{Name: "b", Image: "b:1"})
	res, err := inject.Apply(inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "app:1"}), Sets: compile(t, a, b)})
	if err != nil {
		t.Fatal(err)
	}
	pod := res.Pod()
	pod.ResourceVersion = "7"
	a.Spec.Containers[0].Image, b.Spec.Containers[0].Image = "a:2", "b:2"
	b.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", Value: "y"}} // b cannot update in place
	sets := compile(t, a, b)
	u, err := inject.UpdateInPlace(inject.Input{Pod: pod, Sets: sets}, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Blocked) > 0 || len(u.Images) != 1 || u.Images[0].To != "a:2" {
		t.Fatalf("update of a: images %+v, blocked %q", u.Images, u.Blocked)
	}
	updated := patchedPod(t, pod, u.Patch())
	if got := containerImage(updated, "b"); got != "b:1" {
		t.Errorf("b's sidecar image = %q, want it untouched (b:1)", got)
	}
	if hash, _ := inject.InjectedHash(updated.Annotations, "b"); hash == sets[1].Hash || hash == "" {
		t.Errorf("b's record hash = %q: it must stay the old one", hash)
	}
	if ub, err := inject.UpdateInPlace(inject.Input{Pod: updated, Sets: sets}, "b", nil); err != nil || len(ub.Blocked) != 1 ||
		!strings.Contains(ub.Blocked[0], "spec.containers[b].env") {
		t.Errorf("update of b: %v, blocked %q; want one entry naming spec.containers[b].env", err, ub.Blocked)
	}
}

func containerImage(pod *corev1.Pod, name string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// TestUpdateInPlaceLeavesEditedSidecarsAlone: with the set as it injected the pod known, a
// sidecar someone changed since (kubectl set image) is reported and not updated; an untouched
// one is.
func TestUpdateInPlaceLeavesEditedSidecarsAlone(t *testing.T) {
	cpu := func(v string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}}
	}
	old := webSet("agent", corev1.Container{Name: "agent", Image: "agent:1", Resources: cpu("100m")})
	res, err := inject.Apply(inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "app:1"}), Sets: compile(t, old)})
	if err != nil {
		t.Fatal(err)
	}
	injected := compile(t, old)[0]
	current := webSet("agent", corev1.Container{Name: "agent", Image: "agent:2", Resources: cpu("200m")})
	resources := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			q := resource.MustParse(v)
			p.Spec.Containers[1].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q}, Limits: corev1.ResourceList{corev1.ResourceCPU: q}}
		}
	}
	for _, tt := range []struct {
		name        string
		edit        func(*corev1.Pod)
		wantBlocked string
		wantResized int
	}{
		{"untouched", func(*corev1.Pod) {}, "", 1},
		{"image set by hand", func(p *corev1.Pod) { p.Spec.Containers[1].Image = "agent:1-hotfix" }, "spec.containers[agent].image: changed since injection", 0},
		// The rollout's own resize went through and its image patch did not (the pod changed
		// in between): not an edit, and only the image and the record are left to patch.
		{"resized to the current spec already", resources("200m"), "", 0},
		{"resources set by hand", resources("300m"), "spec.containers[agent].resources: changed since injection", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := res.Pod()
			pod.ResourceVersion = "3"
			tt.edit(pod)
			u, err := inject.UpdateInPlace(inject.Input{Pod: pod, Sets: compile(t, current)}, "agent", injected)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantBlocked == "" && (len(u.Blocked) > 0 || len(u.Images) != 1 || len(u.Resources) != tt.wantResized):
				t.Errorf("blocked %q, images %+v, resources %+v; want the image updated and %d resized", u.Blocked, u.Images, u.Resources, tt.wantResized)
			case tt.wantBlocked != "" && (len(u.Blocked) != 1 || !strings.Contains(u.Blocked[0], tt.wantBlocked) || u.Patch() != nil):
				t.Errorf("blocked %q, patch %v; want one entry containing %q and no patch", u.Blocked, u.Patch(), tt.wantBlocked)
			case u.Recreatable:
				t.Error("a pod edited since injection is recreatable: recreating it would throw the edit away")
			}
		})
	}
}

// TestUpdateInPlaceRefreshesThePinnedImagesRecord: an in-place update of a sidecar pinned to a
// digest rewrites the pod's record of pinned images (sidecarset.io/images) with the new digest.
func TestUpdateInPlaceRefreshesThePinnedImagesRecord(t *testing.T) {
	d1, d2 := "sha256:"+strings.Repeat("1", 64), "sha256:"+strings.Repeat("2", 64)
	a := webSet("a", corev1.Container{Name: "a", Image: "registry.example/a:1@" + d1})
	res, err := inject.Apply(inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "app:1"}), Sets: compile(t, a)})
	if err != nil {
		t.Fatal(err)
	}
	pod := res.Pod()
	pod.ResourceVersion = "7"
	if got := pod.Annotations[appsv1alpha1.ImagesAnnotation]; got != "a=registry.example/a:1@"+d1 {
		t.Fatalf("injected record %q", got)
	}
	a.Spec.Containers[0].Image = "registry.example/a:2@" + d2
	u, err := inject.UpdateInPlace(inject.Input{Pod: pod, Sets: compile(t, a)}, "a", nil)
	if err != nil || len(u.Blocked) > 0 {
		t.Fatalf("update: %v, blocked %q", err, u.Blocked)
	}
	updated := patchedPod(t, pod, u.Patch())
	if got := updated.Annotations[appsv1alpha1.ImagesAnnotation]; got != "a=registry.example/a:2@"+d2 {
		t.Errorf("record after the update %q; want a=registry.example/a:2@%s", got, d2)
	}
}
