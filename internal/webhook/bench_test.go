package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/opmetrics"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// realisticPod is what a Deployment typically creates: two app containers with env, ports,
// probes, resources and mounts; about ten labels; an owner reference.
func realisticPod() *corev1.Pod {
	labels := map[string]string{
		"app": "checkout", "app.kubernetes.io/name": "checkout", "app.kubernetes.io/instance": "checkout-prod",
		"app.kubernetes.io/version": "4.2.1", "app.kubernetes.io/component": "api", "app.kubernetes.io/part-of": "shop",
		"pod-template-hash": "6f9c8d7b5", "team": "payments", "tier": "backend", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue,
	}
	app := func(name string, port int32) corev1.Container {
		probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port)}},
			PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
		return corev1.Container{
			Name: name, Image: "registry.example/shop/" + name + ":4.2.1", ImagePullPolicy: corev1.PullIfNotPresent,
			Args: []string{"--port", fmt.Sprint(port), "--log-format=json"},
			Env: []corev1.EnvVar{{Name: "APP_NAME", Value: name}, {Name: "LOG_LEVEL", Value: "info"},
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
				{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}},
			Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
			ReadinessProbe: probe, LivenessProbe: probe.DeepCopy(),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log/app"}, {Name: "config", MountPath: "/etc/app", ReadOnly: true},
				{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}
	}
	// What the API server's field manager records for the ReplicaSet controller's create, as
	// every pod reaches admission with: keys such as k:{"name":"api"} come escaped.
	container := func(name string) string {
		return `"k:{\"name\":\"` + name + `\"}":{".":{},"f:args":{},"f:env":{".":{},"k:{\"name\":\"APP_NAME\"}":{".":{},"f:name":{},"f:value":{}},` +
			`"k:{\"name\":\"DB_PASSWORD\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:secretKeyRef":{}}}},"f:image":{},"f:imagePullPolicy":{},` +
			`"f:livenessProbe":{".":{},"f:httpGet":{".":{},"f:path":{},"f:port":{}}},"f:name":{},"f:ports":{".":{},` +
			`"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},` +
			`"f:resources":{".":{},"f:limits":{".":{},"f:cpu":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},` +
			`"f:volumeMounts":{".":{},"k:{\"mountPath\":\"/etc/app\"}":{".":{},"f:mountPath":{},"f:name":{},"f:readOnly":{}}}}`
	}
	fields := `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:team":{},"f:tier":{}},` +
		`"f:ownerReferences":{".":{},"k:{\"uid\":\"3f6c0f4e-8a57-4d0c-9a55-2f7a1c1e9b10\"}":{}}},` +
		`"f:spec":{"f:containers":{` + container("api") + `,` + container("worker") + `},"f:dnsPolicy":{},"f:restartPolicy":{},` +
		`"f:schedulerName":{},"f:terminationGracePeriodSeconds":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{},"f:name":{}},` +
		`"k:{\"name\":\"logs\"}":{".":{},"f:emptyDir":{},"f:name":{}}}}}`
	created := metav1.NewTime(time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC))
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "checkout-6f9c8d7b5-", Namespace: "shop", Labels: labels,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "checkout-6f9c8d7b5",
				UID: "3f6c0f4e-8a57-4d0c-9a55-2f7a1c1e9b10", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{app("api", 8080), app("worker", 8081)},
			Volumes: []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "checkout"}, DefaultMode: ptr.To[int32](420)}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: ptr.To[int32](420), Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
						Path: "token", ExpirationSeconds: ptr.To[int64](3607)}}}}}}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: "checkout",
			SchedulerName: "default-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](30),
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
		},
	}
}

// realisticSet returns a log-agent SidecarSet as a cluster runs it, selecting app=<app> in the
// backend and frontend tiers (realisticPod is a backend pod of app checkout): one sidecar,
// named after the set, with CPU requests and limits and shareVolumePolicy enabled, that mounts
// the set's ConfigMap volume <name>-config.
func realisticSet(name, app string) *appsv1alpha1.SidecarSet {
	return builders.SidecarSet(name, builders.ResourceVersion("1"), builders.Generation(1),
		builders.WithSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": app},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"backend", "frontend"}}}}),
		builders.WithSidecars(appsv1alpha1.SidecarContainer{
			Container: corev1.Container{Name: name, Image: "registry.example/log-agent:3.2",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
					Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				VolumeMounts: []corev1.VolumeMount{{Name: name + "-config", MountPath: "/fluent-bit/etc"}}},
			ShareVolumePolicy: appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
		}),
		builders.WithVolumes(corev1.Volume{Name: name + "-config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "log-agent"}}}}),
	)
}

// benchInjector returns an injector whose snapshot holds n SidecarSets, exactly one of which
// selects realisticPod; with plain, that one copies nothing from the app containers.
// overrideAnnotation is the annotation the "overridden" variant's set lets pods set.
const overrideAnnotation = "log-agent.example.com/cpu-limit"

func benchInjector(n int, variant string) *PodInjector {
	store := snapshot.NewStore()
	store.SetSynced(func() bool { return true })
	for i := 0; i < n-1; i++ {
		store.Upsert(realisticSet(fmt.Sprintf("other-%03d", i), fmt.Sprintf("service-%03d", i)))
	}
	set := realisticSet("log-agent", "checkout")
	switch variant {
	case "plain":
		set.Spec.Containers[0].ShareVolumePolicy.Type = appsv1alpha1.ShareVolumePolicyDisabled
	case "computed": // resources from the app containers' (resourcesPolicy)
		set.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		set.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
			Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "max(cpu * 0.1, quantity('10m'))"},
			Limits:   map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceMemory: "memory / 4.0"},
		}}
	case "pinned": // imagePolicy.pin Digest: the image pinned to the digest in status.images
		set.Spec.ImagePolicy = &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest}
		set.Status.Images = []appsv1alpha1.ResolvedImage{{Image: set.Spec.Containers[0].Image,
			Digest: "sha256:9b0e3b1ad2a5c6a0f3c1d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b"}}
	case "overridden": // the pod's annotation sets the CPU limit (overrides), within a rule
		set.Spec.Overrides = []appsv1alpha1.Override{{Annotation: overrideAnnotation, Container: "log-agent",
			Field: appsv1alpha1.OverrideLimitsCPU, Rule: "amount.compareTo(quantity('1')) <= 0"}}
	}
	h := &PodInjector{Sets: store, Metrics: opmetrics.Unregistered(),
		NamespaceLabels: func(context.Context, string) (map[string]string, error) { return nil, nil }}
	switch variant {
	case "limitranged,unsized": // the sidecar sets no resources: the LimitRange's defaults give them
		set.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		fallthrough
	case "limitranged":
		lrs := []corev1.LimitRange{benchLimitRange()}
		h.LimitRanges = func(context.Context, string) ([]corev1.LimitRange, error) { return lrs, nil }
	}
	store.Upsert(set)
	return h
}

// benchLimitRange is a namespace's LimitRange as the API server stores it: default requests
// and limits, a maximum and a limit-to-request ratio per container, and a maximum per pod.
func benchLimitRange() corev1.LimitRange {
	q := resource.MustParse
	return corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "defaults"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer,
			Default:              corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("256Mi")},
			DefaultRequest:       corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("128Mi")},
			Max:                  corev1.ResourceList{corev1.ResourceMemory: q("1Gi")},
			MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: q("10")}},
		{Type: corev1.LimitTypePod, Max: corev1.ResourceList{corev1.ResourceMemory: q("4Gi")}},
	}}}
}

func podRequest(b *testing.B, pod *corev1.Pod) admission.Request {
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: pod.Namespace,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: raw},
	}}
}

// BenchmarkPodInjector measures one admission through our handler, including rendering the
// patch into the response bytes, with 1, 10 and 100 SidecarSets of which one matches (and
// shares the app containers' volume mounts), and with 1 that copies nothing from them, 1 that
// pins its image to a digest, 1 whose
// sidecar's resources a resourcesPolicy computes, 1 whose CPU limit the pod overrides, and 1
// in a namespace with a LimitRange, its sidecar sized or given the LimitRange's defaults.
func BenchmarkPodInjector(b *testing.B) {
	req := podRequest(b, realisticPod())
	overriding := realisticPod()
	overriding.Annotations[overrideAnnotation] = "200m"
	overridingReq := podRequest(b, overriding)
	for _, c := range []struct {
		n       int
		variant string
	}{{1, ""}, {10, ""}, {100, ""}, {1, "plain"}, {1, "pinned"}, {1, "computed"}, {1, "overridden"}, {1, "limitranged"}, {1, "limitranged,unsized"}} {
		h, req := benchInjector(c.n, c.variant), req
		if c.variant == "overridden" {
			req = overridingReq
		}
		name := fmt.Sprintf("sets=%d", c.n)
		if c.variant != "" {
			name += "," + c.variant
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			if c.variant == "pinned" {
				if resp := h.Handle(ctx, req); !strings.Contains(fmt.Sprint(resp.Patches), "@sha256:") {
					b.Fatalf("the pinned set injected no digest: %v", resp.Patches)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				resp := h.Handle(ctx, req)
				if err := resp.Complete(req); err != nil || len(resp.Patch) == 0 {
					b.Fatalf("no patch: %v %+v", err, resp.Result)
				}
			}
		})
	}
}

// BenchmarkNaiveInjector is the baseline every naive injector pays: decode the whole Pod,
// append one container, re-marshal, and diff the two documents into a JSON patch.
func BenchmarkNaiveInjector(b *testing.B) {
	req := podRequest(b, realisticPod())
	sidecar := realisticSet("log-agent", "checkout").Spec.Containers[0].Container
	b.ReportAllocs()
	for b.Loop() {
		var pod corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
			b.Fatal(err)
		}
		pod.Spec.Containers = append(pod.Spec.Containers, sidecar)
		out, err := json.Marshal(&pod)
		if err != nil {
			b.Fatal(err)
		}
		resp := admission.PatchResponseFromRaw(req.Object.Raw, out)
		if err := resp.Complete(req); err != nil || len(resp.Patch) == 0 {
			b.Fatalf("no patch: %v", err)
		}
	}
}
