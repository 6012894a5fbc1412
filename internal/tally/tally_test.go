package tally

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/status"
)

var testScope = status.Scope{}

// world is the truth the Tally is compared with: every Pod, Namespace and set as a full
// recount would see them.
type world struct {
	rng        *rand.Rand
	pods       map[string]*corev1.Pod // namespace/name
	namespaces map[string]map[string]string
	sets       map[string]*inject.CompiledSet
	generation int64
}

var (
	namespaceNames = []string{"shop", "billing", "edge", "kube-system"}
	apps           = []string{"web", "api", "worker"}
)

func (w *world) recount(c *inject.CompiledSet) status.Counts {
	pods := slices.Collect(maps.Values(w.pods))
	return status.Count(c, pods, func(ns string) map[string]string { return w.namespaces[ns] }, testScope)
}

// recountFootprints sums what the set's sidecars request and limit per namespace over every
// Pod, as status.Count sums them in total.
func (w *world) recountFootprints(c *inject.CompiledSet) map[string]Footprint {
	out := map[string]Footprint{}
	for _, pod := range w.pods {
		s, selected := rollout.Classify(c, pod, func(ns string) map[string]string { return w.namespaces[ns] }, testScope)
		if !selected || s.Terminating || s.Excluded || !s.Injected {
			continue
		}
		f := out[pod.Namespace]
		f.Pods++
		f.Add(s.Footprint, 1)
		out[pod.Namespace] = f
	}
	return out
}

// randomSet is a SidecarSet with a random selector, namespace selector, image and strategy.
func (w *world) randomSet(t *testing.T, name string) *inject.CompiledSet {
	t.Helper()
	w.generation++
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: w.generation},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": apps[w.rng.IntN(len(apps))]}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: name,
				Image: fmt.Sprintf("registry.example/%s:%d", name, w.rng.IntN(2))}}},
		},
	}
	if w.rng.IntN(3) == 0 {
		set.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}
	}
	if w.rng.IntN(2) == 0 {
		set.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	}
	if w.rng.IntN(2) == 0 {
		set.Spec.UpdateStrategy.Type = appsv1alpha1.RollingUpdate
	}
	c, err := inject.Compile(set)
	if err != nil {
		t.Fatalf("compiling %s: %v", name, err)
	}
	return c
}

// randomPod is a Pod with random labels, readiness, phase, records and running images.
func (w *world) randomPod(namespace, name string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{"app": apps[w.rng.IntN(len(apps))], appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if w.rng.IntN(10) == 0 {
		delete(pod.Labels, appsv1alpha1.InjectLabel)
	}
	switch w.rng.IntN(10) {
	case 0:
		pod.Status.Phase = corev1.PodSucceeded
	case 1:
		pod.DeletionTimestamp = &metav1.Time{}
	}
	readiness := corev1.ConditionFalse
	if w.rng.IntN(3) > 0 {
		readiness = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: readiness}}
	recs := inject.Records{}
	for name, c := range w.sets {
		switch w.rng.IntN(3) {
		case 0:
			recs[name] = inject.Record{Hash: c.Hash, Containers: []string{name}}
		case 1:
			recs[name] = inject.Record{Hash: "0000000000000000", Containers: []string{name}}
		}
		// The sidecar's container, with random requests and limits (some of the pods carry
		// none: the record can name a container the pod does not have).
		if w.rng.IntN(4) > 0 {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, Resources: w.randomResources()})
		}
		if w.rng.IntN(2) == 0 {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses,
				corev1.ContainerStatus{Name: name, Image: fmt.Sprintf("registry.example/%s:%d", name, w.rng.IntN(2))})
		}
	}
	if len(recs) > 0 {
		pod.Annotations = map[string]string{appsv1alpha1.StatusAnnotation: recs.Encode()}
	}
	return pod
}

// randomResources are random cpu, memory and ephemeral-storage requests and limits, each
// present or not.
func (w *world) randomResources() corev1.ResourceRequirements {
	list := func() corev1.ResourceList {
		l := corev1.ResourceList{}
		if w.rng.IntN(3) > 0 {
			l[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(w.rng.IntN(2000)), resource.DecimalSI)
		}
		if w.rng.IntN(3) > 0 {
			l[corev1.ResourceMemory] = *resource.NewQuantity(int64(w.rng.IntN(1<<30)), resource.BinarySI)
		}
		if w.rng.IntN(3) == 0 {
			l[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(w.rng.IntN(1<<32)), resource.BinarySI)
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: list(), Limits: list()}
}

func (w *world) randomNamespaceLabels() map[string]string {
	labels := map[string]string{}
	if w.rng.IntN(2) == 0 {
		labels["env"] = "prod"
	}
	if w.rng.IntN(5) == 0 {
		labels[appsv1alpha1.NamespaceInjectionLabel] = appsv1alpha1.NamespaceInjectionDisabled
	}
	return labels
}

// TestTallyMatchesRecount drives a Tally with random Pod, Namespace and SidecarSet events and,
// after every event, compares each set's counts with a full recount, and checks that every
// set whose counts changed was named for a reconcile.
func TestTallyMatchesRecount(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := &world{rng: rand.New(rand.NewPCG(seed, 7)), pods: map[string]*corev1.Pod{},
				namespaces: map[string]map[string]string{}, sets: map[string]*inject.CompiledSet{}}
			tl := New(testScope)
			for i := range 4 {
				name := fmt.Sprintf("set-%d", i)
				w.sets[name] = w.randomSet(t, name)
				tl.Sync(w.sets[name])
			}
			counted := map[string]status.Counts{}
			for name, c := range w.sets {
				counted[name] = tl.Sync(c)
			}
			for step := range 600 {
				var (
					what    string
					changed []string
					synced  bool // a set event: the reconcile syncs, nothing is named
				)
				switch op := w.rng.IntN(20); {
				case op < 10:
					ns := namespaceNames[w.rng.IntN(len(namespaceNames))]
					pod := w.randomPod(ns, fmt.Sprintf("pod-%d", w.rng.IntN(40)))
					w.pods[ns+"/"+pod.Name] = pod
					what, changed = "upsert pod "+ns+"/"+pod.Name, tl.UpsertPod(pod)
				case op < 14:
					keys := slices.Sorted(maps.Keys(w.pods))
					if len(keys) == 0 {
						continue
					}
					key := keys[w.rng.IntN(len(keys))]
					pod := w.pods[key]
					delete(w.pods, key)
					what, changed = "delete pod "+key, tl.DeletePod(pod.Namespace, pod.Name)
				case op < 17:
					ns := namespaceNames[w.rng.IntN(len(namespaceNames))]
					labels := w.randomNamespaceLabels()
					w.namespaces[ns] = labels
					what, changed = fmt.Sprintf("namespace %s labels %v", ns, labels),
						tl.UpsertNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})
				case op < 18:
					ns := namespaceNames[w.rng.IntN(len(namespaceNames))]
					delete(w.namespaces, ns)
					what, changed = "delete namespace "+ns, tl.DeleteNamespace(ns)
				case op < 19:
					name := fmt.Sprintf("set-%d", w.rng.IntN(5))
					w.sets[name] = w.randomSet(t, name)
					what, synced = "new spec for "+name, true
				default:
					name := fmt.Sprintf("set-%d", w.rng.IntN(5))
					delete(w.sets, name)
					delete(counted, name)
					tl.Forget(name)
					what, synced = "delete "+name, true
				}
				for _, name := range slices.Sorted(maps.Keys(w.sets)) {
					c := w.sets[name]
					got, want := tl.Sync(c), w.recount(c)
					if got != want {
						t.Fatalf("step %d (%s): %s counts %+v, a full recount gives %+v", step, what, name, got, want)
					}
					if got, want := tl.Footprints(c), w.recountFootprints(c); !maps.Equal(got, want) {
						t.Fatalf("step %d (%s): %s footprints %+v, a full recount gives %+v", step, what, name, got, want)
					}
					if !synced && got != counted[name] && !slices.Contains(changed, name) {
						t.Fatalf("step %d (%s): %s counts went from %+v to %+v but it was not named for a reconcile (named %v)",
							step, what, name, counted[name], got, changed)
					}
					counted[name] = got
				}
				for _, name := range changed {
					if _, known := w.sets[name]; !known {
						t.Fatalf("step %d (%s): named %s, which the Tally was told to forget", step, what, name)
					}
				}
			}
		})
	}
}

// TestRollingSetsOnEveryPodEvent: a RollingUpdate set with outdated Pods is named on every event of
// a Pod it selects, even when its counts do not change; once every Pod is updated, only on
// count changes; other sets only on count changes.
func TestRollingSetsOnEveryPodEvent(t *testing.T) {
	w := &world{rng: rand.New(rand.NewPCG(1, 2)), sets: map[string]*inject.CompiledSet{}}
	rolling := w.randomSet(t, "rolling")
	rolling.Set.Spec.UpdateStrategy.Type = appsv1alpha1.RollingUpdate
	rolling.Set.Spec.NamespaceSelector = nil
	rolling.Set.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	rolling = recompile(t, rolling.Set)
	plain := recompile(t, rolling.Set.DeepCopy())
	plain.Set.Name, plain.Set.UID = "plain", "uid-plain"
	plain.Set.Spec.UpdateStrategy.Type = appsv1alpha1.NotUpdate
	plain = recompile(t, plain.Set)

	tl := New(testScope)
	tl.Sync(rolling)
	tl.Sync(plain)
	pod := func(hash string, annotation string) *corev1.Pod {
		recs := inject.Records{"rolling": {Hash: hash, Containers: []string{"rolling"}}}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop",
			Labels:      map[string]string{"app": "web", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue},
			Annotations: map[string]string{appsv1alpha1.StatusAnnotation: recs.Encode(), "note": annotation}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	if got := tl.UpsertPod(pod("0000000000000000", "a")); !slices.Equal(got, []string{"plain", "rolling"}) {
		t.Fatalf("new outdated pod: named %v, want both sets (both counts changed)", got)
	}
	if got := tl.UpsertPod(pod("0000000000000000", "b")); !slices.Equal(got, []string{"rolling"}) {
		t.Fatalf("outdated pod changed, counts not: named %v, want only the rolling set", got)
	}
	if got := tl.UpsertPod(pod(rolling.Hash, "b")); !slices.Equal(got, []string{"rolling"}) {
		t.Fatalf("pod updated: named %v, want the rolling set (its counts changed)", got)
	}
	if got := tl.UpsertPod(pod(rolling.Hash, "c")); len(got) != 0 {
		t.Fatalf("every pod updated, nothing counted changed: named %v, want none", got)
	}
}

// TestPolicyResizeWakesTheRollout: once every pod is updated, a pod event that changes no count
// still names a rolling set when a sidecar's resourcesPolicy must follow an app container's
// in-place resize.
func TestPolicyResizeWakesTheRollout(t *testing.T) {
	set := recompile(t, &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh", UID: "uid-mesh"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1"},
				ResourcesPolicy: &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
					Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"}}}}},
		}})
	tl := New(testScope)
	tl.Sync(set)
	pod := func(app, proxy string) *corev1.Pod {
		recs := inject.Records{"mesh": {Hash: set.Hash, Containers: []string{"proxy"}}}
		cpu := func(q string) corev1.ResourceRequirements {
			return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop",
			Labels:      map[string]string{"app": "web", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue},
			Annotations: map[string]string{appsv1alpha1.StatusAnnotation: recs.Encode()}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", Resources: cpu(app)},
				{Name: "proxy", Image: "proxy:1", Resources: cpu(proxy)}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	if got := tl.UpsertPod(pod("400m", "200m")); !slices.Equal(got, []string{"mesh"}) {
		t.Fatalf("new updated pod: named %v, want the set (its counts changed)", got)
	}
	if got := tl.UpsertPod(pod("400m", "200m")); len(got) != 0 {
		t.Fatalf("nothing changed: named %v, want none", got)
	}
	if got := tl.UpsertPod(pod("1", "200m")); !slices.Equal(got, []string{"mesh"}) {
		t.Fatalf("the app container resized: named %v, want the set (its sidecar must follow)", got)
	}
}

func recompile(t *testing.T, set *appsv1alpha1.SidecarSet) *inject.CompiledSet {
	t.Helper()
	c, err := inject.Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sidecarResources are a bench pod's containers' requests and limits.
var sidecarResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
}

// BenchmarkPodEvent is the work one Pod event costs with 50 sets, at 200 and 10,000 Pods held:
// it should not grow with the Pods.
func BenchmarkPodEvent(b *testing.B) {
	for _, n := range []int{200, 10_000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			tl := New(testScope)
			var compiled []*inject.CompiledSet
			for i := range 50 {
				set := &appsv1alpha1.SidecarSet{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("set-%02d", i), UID: types.UID(fmt.Sprint(i)), Generation: 1},
					Spec: appsv1alpha1.SidecarSetSpec{
						Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", i%10)}},
						Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: fmt.Sprintf("agent-%d", i), Image: "registry.example/agent:1"}}},
					},
				}
				c, err := inject.Compile(set)
				if err != nil {
					b.Fatal(err)
				}
				compiled = append(compiled, c)
				tl.Sync(c)
			}
			pods := make([]*corev1.Pod, n)
			for i := range pods {
				app := fmt.Sprintf("app-%d", i%10)
				recs := inject.Records{}
				// The app and each set's sidecar, with requests and limits (what the sets'
				// footprints add up).
				containers := []corev1.Container{{Name: "app", Resources: sidecarResources}}
				for _, c := range compiled {
					if c.SelectsPod(map[string]string{"app": app}) {
						recs[c.Name()] = inject.Record{Hash: c.Hash, Containers: []string{c.Set.Spec.Containers[0].Name}}
						containers = append(containers, corev1.Container{Name: c.Set.Spec.Containers[0].Name, Resources: sidecarResources})
					}
				}
				pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: fmt.Sprintf("ns-%d", i%100),
					Labels:      map[string]string{"app": app, appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue},
					Annotations: map[string]string{appsv1alpha1.StatusAnnotation: recs.Encode()}},
					Spec:   corev1.PodSpec{Containers: containers},
					Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
				tl.UpsertPod(pods[i])
			}
			notReady := make([]*corev1.Pod, n)
			for i, p := range pods {
				notReady[i] = p.DeepCopy()
				notReady[i].Status.Conditions[0].Status = corev1.ConditionFalse
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// One Pod goes NotReady and back: two events, each changing counts.
				tl.UpsertPod(notReady[i%n])
				tl.UpsertPod(pods[i%n])
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/event")
		})
	}
}
