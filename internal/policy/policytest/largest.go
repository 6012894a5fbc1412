package policytest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// LargestSet is the largest SidecarSet the CRD allows (32 containers, 32 init containers, 64
// volumes, 16 pull secrets), selecting app=<app>, each container with args, env from several
// sources, a probe, resources and mounts; the init containers are native sidecars. Its
// containers transfer policy.MaxTransfers env vars (APP_VAR_0...) from the container app, the
// most a policy copies, and every container and init container shares the app's volume
// mounts (AddAppValues gives a pod those).
func LargestSet(name, app string) *appsv1alpha1.SidecarSet {
	set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1alpha1.SidecarSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
	}}
	container := func(n int, kind string) appsv1alpha1.SidecarContainer {
		c := corev1.Container{
			Name:  fmt.Sprintf("%s-%s-%d", name, kind, n),
			Image: fmt.Sprintf("registry.example/%s:%d.0", kind, n),
			Args:  []string{"--listen=127.0.0.1:0", "--log-level=info", `--quoted="x\y"`},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("8Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: fmt.Sprintf("%s-v-%d", name, 2*n), MountPath: "/a"},
				{Name: fmt.Sprintf("%s-v-%d", name, 2*n+1), MountPath: "/b", ReadOnly: true},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 5},
		}
		for e := 0; e < 8; e++ {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", e), Value: fmt.Sprintf("value %d: ünïcode \"quoted\"\n", e)})
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}})
		return appsv1alpha1.SidecarContainer{Container: c,
			ShareVolumePolicy: appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}}
	}
	for n := 0; n < 32; n++ {
		c := container(n, "c")
		// policy.MaxTransfers in all, the most a policy copies.
		for k := range policy.MaxTransfers / 32 {
			c.TransferEnv = append(c.TransferEnv, appsv1alpha1.TransferEnvVar{SourceContainerName: "app",
				EnvName: fmt.Sprintf("APP_VAR_%d", n*(policy.MaxTransfers/32)+k)})
		}
		set.Spec.Containers = append(set.Spec.Containers, c)
		init := container(n, "i") // native sidecars, half of them in front of the pod's own
		init.VolumeMounts = init.VolumeMounts[:1]
		init.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		if n%2 == 0 {
			init.PodInjectPolicy = appsv1alpha1.BeforeAppContainer
		}
		set.Spec.InitContainers = append(set.Spec.InitContainers, init)
	}
	for n := 0; n < 64; n++ {
		set.Spec.Volumes = append(set.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("%s-v-%d", name, n),
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	for n := 0; n < 16; n++ {
		set.Spec.ImagePullSecrets = append(set.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: fmt.Sprintf("pull-%d", n)})
	}
	return set
}

// ManyOthers are n SidecarSets (other-000...) beside LargestSet, each a term of its policy's
// "selected by another set" condition: a pod selector with expressions, a namespace selector.
func ManyOthers(n int) []*appsv1alpha1.SidecarSet {
	out := make([]*appsv1alpha1.SidecarSet, n)
	for i := range out {
		name := fmt.Sprintf("other-%03d", i)
		o := builders.SidecarSet(name, builders.Selecting(name),
			builders.WithContainers(corev1.Container{Name: name + "-agent", Image: "registry.example/agent:1.0"}))
		o.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}},
			{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
		}
		o.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("t%d", i)}}
		out[i] = o
	}
	return out
}

// AddAppValues gives the pod's first container (the app) what LargestSet copies: the
// policy.MaxTransfers variables APP_VAR_0... (value "v"), and mounts more volume mounts (app-0...
// at /app/app-0..., each of an emptyDir volume added to the pod).
func AddAppValues(pod *corev1.Pod, mounts int) {
	app := &pod.Spec.Containers[0]
	for k := range policy.MaxTransfers {
		app.Env = append(app.Env, corev1.EnvVar{Name: fmt.Sprintf("APP_VAR_%d", k), Value: "v"})
	}
	for k := range mounts {
		name := fmt.Sprintf("app-%d", k)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		app.VolumeMounts = append(app.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/app/" + name})
	}
}
