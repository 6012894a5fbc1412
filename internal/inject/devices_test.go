package inject_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
)

// TestShareVolumeDevices: shareVolumeDevicePolicy gives a sidecar the app containers' volume
// devices that stay valid in it, as Kubernetes validates a container: one device per path,
// one device per volume, no device where a mount is or of a volume mounted. What is left out
// is recorded in notShared with a warning naming the set and the field.
func TestShareVolumeDevices(t *testing.T) {
	dev := func(volume, path string) corev1.VolumeDevice {
		return corev1.VolumeDevice{Name: volume, DevicePath: path}
	}
	tests := []struct {
		name      string
		policy    *appsv1alpha1.ShareVolumePolicy
		sidecar   func(*appsv1alpha1.SidecarContainer)
		init      bool     // the sidecar is a native sidecar (an init container)
		want      []string // the sidecar's devices, volume@path, in order
		notShared []string // fragments of the notShared entries, in order
	}{
		{name: "enabled", policy: &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
			want: []string{"data@/dev/xvda", "wal@/dev/xvdb"}},
		{name: "native sidecar", init: true, policy: &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
			want: []string{"data@/dev/xvda", "wal@/dev/xvdb"}},
		{name: "disabled", policy: &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyDisabled}},
		{name: "unset", policy: nil},
		{name: "type unset (the CRD defaults it to disabled)", policy: &appsv1alpha1.ShareVolumePolicy{}},
		{name: "the sidecar declares the same device", policy: &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
			sidecar: func(sc *appsv1alpha1.SidecarContainer) {
				sc.VolumeDevices = []corev1.VolumeDevice{dev("wal", "/dev/xvdb")}
			},
			want: []string{"wal@/dev/xvdb", "data@/dev/xvda"}},
		{name: "the sidecar's own device at the path", policy: &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
			sidecar: func(sc *appsv1alpha1.SidecarContainer) {
				sc.VolumeDevices = []corev1.VolumeDevice{dev("scratch", "/dev/xvda")}
			},
			want:      []string{"scratch@/dev/xvda", "wal@/dev/xvdb"},
			notShared: []string{`device /dev/xvda from container "db" (volume "data"): the sidecar uses that path for its own device of volume "scratch"`}},
		{name: "the sidecar's own device of the volume", policy: &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
			sidecar: func(sc *appsv1alpha1.SidecarContainer) {
				sc.VolumeDevices = []corev1.VolumeDevice{dev("data", "/dev/data")}
			},
			want:      []string{"data@/dev/data", "wal@/dev/xvdb"},
			notShared: []string{`device /dev/xvda from container "db" (volume "data"): the sidecar has that volume as a device at another path already`}},
		{name: "the sidecar mounts a volume at the path", policy: &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
			sidecar: func(sc *appsv1alpha1.SidecarContainer) {
				sc.VolumeMounts = []corev1.VolumeMount{{Name: "state", MountPath: "/dev/xvdb"}}
			},
			want:      []string{"data@/dev/xvda"},
			notShared: []string{`device /dev/xvdb from container "db" (volume "wal"): the sidecar mounts a volume at that path`}},
		{name: "the sidecar mounts the volume", policy: &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
			sidecar: func(sc *appsv1alpha1.SidecarContainer) {
				sc.VolumeMounts = []corev1.VolumeMount{{Name: "wal", MountPath: "/wal"}}
			},
			want:      []string{"data@/dev/xvda"},
			notShared: []string{`device /dev/xvdb from container "db" (volume "wal"): the sidecar mounts that volume`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// shareVolumePolicy lets the sidecar's own devices and mounts name the pod's volumes;
			// the app containers mount nothing, so it shares nothing.
			sc := appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "backup", Image: "backup:1"}, ShareVolumeDevicePolicy: tt.policy,
				ShareVolumePolicy: appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}}
			if tt.sidecar != nil {
				tt.sidecar(&sc)
			}
			set := webSet("backup")
			set.Spec.Containers = nil
			set.Spec.Volumes = []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "scratch"}}},
				{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			if tt.init {
				sc.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{sc}
			} else {
				set.Spec.Containers = []appsv1alpha1.SidecarContainer{sc}
			}
			// db and its exporter both use data at /dev/xvda: the sidecar gets it once.
			pod := webPod(
				corev1.Container{Name: "db", Image: "db:16", VolumeDevices: []corev1.VolumeDevice{dev("data", "/dev/xvda"), dev("wal", "/dev/xvdb")}},
				corev1.Container{Name: "exporter", Image: "exporter:1", VolumeDevices: []corev1.VolumeDevice{dev("data", "/dev/xvda")}})
			for _, v := range []string{"data", "wal"} {
				pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db-" + v}}})
			}
			in := inject.Input{Pod: pod, Sets: compile(t, set)}
			if !injecttest.ValidInput(in) {
				t.Fatal("the pod or the SidecarSet is invalid: the case would not show that injection keeps a valid pod valid")
			}
			res, err := inject.Apply(in)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			out := res.Pod()
			list := out.Spec.Containers
			if tt.init {
				list = out.Spec.InitContainers
			}
			i := slices.IndexFunc(list, func(c corev1.Container) bool { return c.Name == "backup" })
			if i < 0 {
				t.Fatalf("no sidecar injected: %v", containerNames(list))
			}
			var got []string
			for _, d := range list[i].VolumeDevices {
				got = append(got, d.Name+"@"+d.DevicePath)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("sidecar devices %q, want %q", got, tt.want)
			}
			notShared := res.Records["backup"].NotShared
			if len(notShared) != len(tt.notShared) || len(res.Warnings) != len(tt.notShared) {
				t.Fatalf("notShared %q, warnings %q; want %d of each", notShared, res.Warnings, len(tt.notShared))
			}
			for k, want := range tt.notShared {
				if !strings.Contains(notShared[k], want) {
					t.Errorf("notShared[%d] = %q, want it to contain %q", k, notShared[k], want)
				}
				if prefix := fmt.Sprintf("SidecarSet %q shareVolumeDevicePolicy left out ", "backup"); !strings.HasPrefix(res.Warnings[k], prefix) || !strings.Contains(res.Warnings[k], want) {
					t.Errorf("warning %q, want %q then %q", res.Warnings[k], prefix, want)
				}
			}
			assertValidStaysValid(t, in, out)
			assertPatchMatchesPod(t, pod, res)
			assertIdempotent(t, res, inject.Input{Pod: out, Sets: compile(t, set)})
		})
	}
}
