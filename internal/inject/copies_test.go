package inject_test

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestCopiesKeepFieldsThisBuildDoesNotKnow admits pods whose app containers carry env,
// volumeMounts and volumeDevices fields unknown to this binary's API types (as a newer API
// server sends them): what transferEnv, shareVolumePolicy and shareVolumeDevicePolicy copy into
// a sidecar keeps them, at any depth, while what the engine itself sets on a copy wins.
func TestCopiesKeepFieldsThisBuildDoesNotKnow(t *testing.T) {
	tests := []struct {
		name    string
		app     string // the app container's JSON
		sidecar appsv1alpha1.SidecarContainer
		// list and entry name the sidecar's copied entry; want are JSON values it must carry.
		list, entry string
		want        map[string]string
	}{{
		name: "transferEnv, unknown fields top-level and nested",
		app: `{"name": "app", "image": "app:1", "env": [{"name": "TOKEN", "futureTop": {"n": 12345678901234567890},
			"valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "futureNested": true}}}]}`,
		sidecar: appsv1alpha1.SidecarContainer{TransferEnv: []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "TOKEN"}}},
		list:    "env", entry: "TOKEN",
		want: map[string]string{
			"futureTop":                           `{"n":12345678901234567890}`,
			"valueFrom.secretKeyRef.futureNested": `true`,
			"valueFrom.secretKeyRef.key":          `"k"`,
		},
	}, {
		name: "transferEnv, the engine pins containerName and keeps the rest",
		app: `{"name": "app", "image": "app:1", "env": [{"name": "CPU",
			"valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "futureRounding": "up"}}}]}`,
		sidecar: appsv1alpha1.SidecarContainer{TransferEnv: []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "CPU"}}},
		list:    "env", entry: "CPU",
		want: map[string]string{
			"valueFrom.resourceFieldRef.containerName":  `"app"`,
			"valueFrom.resourceFieldRef.futureRounding": `"up"`,
		},
	}, {
		name: "transferEnv of a reference brings the referenced var with its unknown fields",
		app: `{"name": "app", "image": "app:1", "env": [{"name": "POD", "futureA": 1, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
			{"name": "URL", "value": "http://$(POD)/", "futureB": [1, 2]}]}`,
		sidecar: appsv1alpha1.SidecarContainer{TransferEnv: []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "URL"}}},
		list:    "env", entry: "POD",
		want: map[string]string{"futureA": `1`, "valueFrom.fieldRef.fieldPath": `"metadata.name"`},
	}, {
		name:    "shareVolumePolicy",
		app:     `{"name": "app", "image": "app:1", "volumeMounts": [{"name": "data", "mountPath": "/data", "futureMountOption": {"x": "y"}}]}`,
		sidecar: appsv1alpha1.SidecarContainer{ShareVolumePolicy: appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}},
		list:    "volumeMounts", entry: "data",
		want: map[string]string{"futureMountOption": `{"x":"y"}`, "mountPath": `"/data"`},
	}, {
		name: "shareVolumePolicy brings a subPathExpr's var with its unknown fields",
		app: `{"name": "app", "image": "app:1", "env": [{"name": "POD", "futureC": "c", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
			"volumeMounts": [{"name": "data", "mountPath": "/data", "subPathExpr": "$(POD)"}]}`,
		sidecar: appsv1alpha1.SidecarContainer{ShareVolumePolicy: appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}},
		list:    "env", entry: "POD",
		want: map[string]string{"futureC": `"c"`},
	}, {
		name:    "shareVolumeDevicePolicy",
		app:     `{"name": "app", "image": "app:1", "volumeDevices": [{"name": "data", "devicePath": "/dev/xvda", "futureDeviceOption": {"x": "y"}}]}`,
		sidecar: appsv1alpha1.SidecarContainer{ShareVolumeDevicePolicy: &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}},
		list:    "volumeDevices", entry: "data",
		want: map[string]string{"futureDeviceOption": `{"x":"y"}`, "devicePath": `"/dev/xvda"`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "shop",
				"labels": {"app": "web", "sidecarset.io/inject": "true"}},
				"spec": {"volumes": [{"name": "data", "emptyDir": {}}], "containers": [` + tt.app + `]}}`)
			var pod corev1.Pod
			if err := json.Unmarshal(raw, &pod); err != nil {
				t.Fatal(err)
			}
			set := webSet("agent")
			sc := tt.sidecar
			sc.Name, sc.Image = "agent", "agent:1"
			set.Spec.Containers = []appsv1alpha1.SidecarContainer{sc}
			res, err := inject.Apply(inject.Input{Pod: &pod, Sets: compile(t, set)})
			if err != nil {
				t.Fatal(err)
			}
			ops, err := res.PatchFrom(admittedOf(t, raw))
			if err != nil {
				t.Fatalf("PatchFrom: %v", err)
			}
			patch, err := jsonpatchapply.DecodePatch(mustJSON(t, ops))
			if err != nil {
				t.Fatal(err)
			}
			out, err := patch.Apply(raw)
			if err != nil {
				t.Fatalf("applying %s: %v", mustJSON(t, ops), err)
			}
			copied := entryOf(t, out, "agent", tt.list, tt.entry)
			for path, want := range tt.want {
				if got := string(mustJSON(t, lookup(copied, path))); got != want {
					t.Errorf("sidecar %s %q: %s = %s, want %s (entry %s)", tt.list, tt.entry, path, got, want, mustJSON(t, copied))
				}
			}
			// Without the raw pod, the copies are what this build knows; nothing else differs.
			var typed, viaRaw corev1.Pod
			if err := json.Unmarshal(out, &viaRaw); err != nil {
				t.Fatal(err)
			}
			typed = *patchedPod(t, &pod, res.Patch())
			if d := podsDiff(t, &typed, &viaRaw); d != "" {
				t.Errorf("PatchFrom and Patch differ in what this build knows (-Patch +PatchFrom):\n%s", d)
			}
		})
	}
}

// TestPatchFromRefusesARawPodThatIsNotTheInput: the raw pod must be the decoded one; an entry
// it lacks is an error, never a silently different copy.
func TestPatchFromRefusesARawPodThatIsNotTheInput(t *testing.T) {
	pod := webPod(corev1.Container{Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "A", Value: "a"}}})
	set := webSet("agent", corev1.Container{Name: "agent", Image: "agent:1"})
	set.Spec.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "A"}}
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, set)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = res.PatchFrom(admittedOf(t, []byte(`{"spec": {"containers": [{"name": "app"}]}}`)))
	if err == nil || !strings.Contains(err.Error(), "spec.containers[0].env[0]") {
		t.Errorf("PatchFrom(a pod without the copied entry) = %v, want an error naming spec.containers[0].env[0]", err)
	}
}

// entryOf is the entry named name of the list of the container named container in a pod's JSON.
func entryOf(t *testing.T, pod []byte, container, list, name string) map[string]any {
	t.Helper()
	var obj struct {
		Spec struct {
			Containers []map[string]any `json:"containers"`
		} `json:"spec"`
	}
	d := json.NewDecoder(strings.NewReader(string(pod)))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil {
		t.Fatal(err)
	}
	for _, c := range obj.Spec.Containers {
		if c["name"] != container {
			continue
		}
		entries, _ := c[list].([]any)
		for _, e := range entries {
			if m, _ := e.(map[string]any); m["name"] == name {
				return m
			}
		}
	}
	t.Fatalf("no %s entry %q in container %q of %s", list, name, container, pod)
	return nil
}

// lookup follows a dotted path of object keys.
func lookup(v any, path string) any {
	for _, key := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[key]
	}
	return v
}
