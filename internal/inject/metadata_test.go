package inject_test

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

func patchSet(policy appsv1alpha1.PatchPolicy, annotations map[string]string) *appsv1alpha1.SidecarSet {
	s := webSet("agent", corev1.Container{Name: "agent", Image: "agent:1"})
	if annotations != nil {
		s.Spec.PatchPodMetadata = []appsv1alpha1.PatchPodMetadata{{PatchPolicy: policy, Annotations: annotations}}
	}
	return s
}

// TestUpdateInPlacePatchedAnnotations injects a pod with a set that patches annotations,
// changes the set, and checks that the in-place update applies the set's current patches and
// removes the keys it no longer patches, but only those whose value is still the one it put,
// and that the updated pod is what injecting it afresh leaves unchanged.
func TestUpdateInPlacePatchedAnnotations(t *testing.T) {
	allowed, err := inject.ParseKeyAllowList([]string{"example.com/*"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		own    map[string]string // the pod's own annotations when created
		before map[string]string // the set's patches at injection (Overwrite)
		edit   map[string]string // what someone changes on the pod after injection
		after  *appsv1alpha1.SidecarSet
		want   map[string]string // the patched keys on the updated pod (example.com/ only)
	}{
		{"a value changed", nil, map[string]string{"example.com/a": "1"}, nil,
			patchSet(appsv1alpha1.PatchPolicyOverwrite, map[string]string{"example.com/a": "2"}),
			map[string]string{"example.com/a": "2"}},
		{"a key no longer patched is removed", nil, map[string]string{"example.com/a": "1", "example.com/b": "1"}, nil,
			patchSet(appsv1alpha1.PatchPolicyOverwrite, map[string]string{"example.com/a": "1"}),
			map[string]string{"example.com/a": "1"}},
		{"the field removed", nil, map[string]string{"example.com/a": "1"}, nil,
			patchSet("", nil), map[string]string{}},
		{"a value someone changed since is the pod's own and stays", nil, map[string]string{"example.com/a": "1"},
			map[string]string{"example.com/a": "mine"}, patchSet("", nil), map[string]string{"example.com/a": "mine"}},
		{"a new Retain key keeps the pod's own value", map[string]string{"example.com/b": "own"}, map[string]string{"example.com/a": "1"}, nil,
			patchSet(appsv1alpha1.PatchPolicyRetain, map[string]string{"example.com/a": "1", "example.com/b": "set"}),
			map[string]string{"example.com/a": "1", "example.com/b": "own"}},
		{"a merged value is merged again", map[string]string{"example.com/j": `{"own":1}`}, nil, nil,
			patchSet(appsv1alpha1.PatchPolicyMergePatchJSON, map[string]string{"example.com/j": `{"set":2}`}),
			map[string]string{"example.com/j": `{"own":1,"set":2}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := webPod(corev1.Container{Name: "app", Image: "app:1"})
			pod.Annotations = maps.Clone(tt.own)
			res, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, patchSet(appsv1alpha1.PatchPolicyOverwrite, tt.before)),
				AllowedAnnotations: &allowed})
			if err != nil {
				t.Fatal(err)
			}
			injected := res.Pod()
			injected.ResourceVersion = "7"
			maps.Copy(injected.Annotations, tt.edit)
			in := inject.Input{Pod: injected, Sets: compile(t, tt.after), AllowedAnnotations: &allowed}
			u, err := inject.UpdateInPlace(in, "agent", nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Blocked) > 0 {
				t.Fatalf("blocked: %v", u.Blocked)
			}
			updated := patchedPod(t, injected, u.Patch())
			got := map[string]string{}
			for k, v := range updated.Annotations {
				if len(k) > len("example.com/") && k[:len("example.com/")] == "example.com/" {
					got[k] = v
				}
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("patched annotations %v, want %v", got, tt.want)
			}
			again, err := inject.Apply(inject.Input{Pod: updated, Sets: compile(t, tt.after), AllowedAnnotations: &allowed})
			if err != nil {
				t.Fatal(err)
			}
			if again.Changed() {
				t.Errorf("injecting the updated pod afresh changes it: %v", again.Patch())
			}
		})
	}
}

// TestKeyAllowList: exact keys and prefix/* patterns; the operator's own keys never; bad
// entries refused naming the flag.
func TestKeyAllowList(t *testing.T) {
	l, err := inject.ParseKeyAllowList([]string{"prometheus.io/scrape", "logging.example.com/*", " "})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{
		"prometheus.io/scrape": true, "prometheus.io/port": false, "logging.example.com/config": true,
		"example.com/config": false, "sidecarset.io/status": false,
	} {
		if got := l.Allows(key); got != want {
			t.Errorf("Allows(%q) = %v, want %v", key, got, want)
		}
	}
	all, err := inject.ParseKeyAllowList([]string{"sidecarset.io/*"})
	if err != nil {
		t.Fatal(err)
	}
	if all.Allows("sidecarset.io/status") {
		t.Error("sidecarset.io/status allowed: the operator's own keys must never be")
	}
	var none *inject.KeyAllowList
	if none.Allows("prometheus.io/scrape") {
		t.Error("a nil allow-list allows a key")
	}
	for _, bad := range []string{"*", "example.com/a*", "Bad Key", "-x.com/*"} {
		if _, err := inject.ParseKeyAllowList([]string{bad}); err == nil {
			t.Errorf("ParseKeyAllowList(%q) accepted", bad)
		}
	}
}
