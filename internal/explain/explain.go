// Package explain says, for one Pod, what every SidecarSet does to it and why: the answer to
// "why did my pod not get the sidecar?" without reading the operator's logs. It asks the same
// engine and snapshot the webhook uses, so an explanation cannot disagree with an admission.
package explain

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
)

// Verdict is what a SidecarSet does to a Pod. The values are stable: scripts may read them.
type Verdict string

// Verdicts, from the first reason that applies. Where the engine has a reason for the same
// thing (inject.MatchReason, inject.GateReason), the verdict is that reason.
const (
	// Injects: the set injects into the Pod (at creation, for a Pod that exists).
	Injects Verdict = "Injects"
	// NamespaceExcluded: the Pod's namespace is never injected (kube-system, the operator's
	// own namespace, --excluded-namespaces, or opted out with sidecarset.io/injection=disabled:
	// inject.GateExcludedNamespace and inject.GateNamespaceOptedOut).
	NamespaceExcluded Verdict = "NamespaceExcluded"
	// NotOptedIn: the Pod lacks the opt-in label; the API server never calls the webhook.
	NotOptedIn = Verdict(inject.GateNotOptedIn)
	// MirrorPod: the Pod is a mirror pod, the API server's copy of a static pod, which is
	// never injected (the kubelet runs the static pod's manifest, not the object).
	MirrorPod = Verdict(inject.GateMirrorPod)
	// Invalid: the set cannot be compiled and injects nothing.
	Invalid Verdict = "Invalid"
	// Stopped: the set conflicts with an older set and injects nothing while it lasts.
	Stopped Verdict = "Stopped"
	// SelectorMismatch: the set's selector does not match the Pod's labels.
	SelectorMismatch = Verdict(inject.SelectorMismatch)
	// NamespaceMismatch: the set's namespaceSelector does not match the namespace's labels.
	NamespaceMismatch = Verdict(inject.NamespaceMismatch)
	// Paused: the set matches but its injection is paused.
	Paused = Verdict(inject.InjectionPaused)
	// Refused: injecting the set would clash with the Pod or another set; the webhook denies
	// the Pod.
	Refused Verdict = "Refused"
	// RefusedWithOthers: the set would inject, but the Pod is denied because of another set.
	RefusedWithOthers Verdict = "RefusedWithOthers"
)

// Explanation is one SidecarSet's verdict on a Pod.
type Explanation struct {
	SidecarSet string
	Verdict    Verdict
	// Why says what decided the verdict and, where there is one, the fix.
	Why string
	// Sidecars, for a Pod that exists and that the set injected, says whether they are the
	// set's current content and, if not, what keeps them outdated. Empty otherwise.
	Sidecars string
}

// Pod is what Explain needs to know about one Pod.
type Pod struct {
	Pod *corev1.Pod
	// NamespaceLabels are the labels of the Pod's namespace.
	NamespaceLabels map[string]string
	// Existing is true for a Pod read from the cluster: its sidecars are then compared with
	// the sets' current content.
	Existing bool
	// LimitRanges are the LimitRanges of the Pod's namespace that the webhook judges it by
	// (webhook.PodInjector.NamespaceLimitRanges): a set whose sidecars break one is Refused.
	LimitRanges []corev1.LimitRange
}

// Denied reports whether the webhook denies the Pod the explanations are of: one of them is
// Refused or RefusedWithOthers.
func Denied(list []Explanation) bool {
	return slices.ContainsFunc(list, func(x Explanation) bool { return x.Verdict == Refused || x.Verdict == RefusedWithOthers })
}

// Options are the cluster's settings the webhook runs with.
type Options struct {
	// Scope names the namespaces never injected by name: the operator's own and
	// --excluded-namespaces (kube-system always).
	Scope inject.Scope
	// Injected returns the set as it was when it injected a Pod (its stored revision of the
	// hash), or nil when it is not known; it lets Explain name edits made since injection.
	Injected func(c *inject.CompiledSet, hash string) *inject.CompiledSet
	// AllowedAnnotations are the annotation keys sets may patch onto pods, as the operator's
	// --patch-pod-metadata-allowed-keys says; nil allows none.
	AllowedAnnotations *inject.KeyAllowList
	// Now is when the explanation is given: how long a restarting Pod has waited is measured
	// to it. Zero: not measured.
	Now time.Time
}

// Explain returns one Explanation per SidecarSet of the snapshot, invalid ones included,
// sorted by name.
func Explain(snap *snapshot.Snapshot, p Pod, opts Options) []Explanation {
	pod := p.Pod
	var out []Explanation
	add := func(name string, v Verdict, why string) {
		out = append(out, Explanation{SidecarSet: name, Verdict: v, Why: why})
	}
	everyone := func(v Verdict, why string) []Explanation {
		for _, c := range snap.Valid {
			add(c.Name(), v, why)
		}
		for name := range snap.Invalid {
			add(name, v, why)
		}
		return sorted(out)
	}
	if ok, reason, why := inject.Gate(&pod.ObjectMeta, p.NamespaceLabels, opts.Scope); !ok {
		return everyone(gateVerdict(reason), why)
	}

	for name, err := range snap.Invalid {
		add(name, Invalid, fmt.Sprintf("the SidecarSet is invalid and injects nothing: %v", err))
	}
	injecting := sets.New[string]()
	for _, c := range snap.Sets {
		injecting.Insert(c.Name())
	}
	for _, c := range snap.Valid {
		switch {
		case injecting.Has(c.Name()):
			continue
		case !c.SelectsPod(pod.Labels):
			add(c.Name(), SelectorMismatch, selectorWhy(c))
			continue
		}
		for _, conflict := range snap.Conflicts[c.Name()] {
			if conflict.Stopped {
				add(c.Name(), Stopped, fmt.Sprintf("it conflicts with the older SidecarSet %q (%s) and injects nothing until that is fixed",
					conflict.With, strings.Join(conflict.Fields, "; ")))
				break
			}
		}
	}

	candidates := inject.Candidates(snap.Sets, pod.Labels)
	for _, c := range snap.Sets {
		if !slices.Contains(candidates, c) {
			add(c.Name(), SelectorMismatch, selectorWhy(c))
		}
	}
	if len(candidates) == 0 {
		return sorted(out)
	}
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: candidates, NamespaceLabels: p.NamespaceLabels, SetByName: snap.Get,
		AllowedAnnotations: opts.AllowedAnnotations, LimitRanges: p.LimitRanges})
	var refused *inject.RefusedError
	if err != nil && !errors.As(err, &refused) {
		refused = &inject.RefusedError{Detail: err.Error()}
	}
	if refused != nil {
		for _, c := range candidates {
			switch reason := c.Match(pod.Labels, p.NamespaceLabels); {
			case reason == inject.NamespaceMismatch:
				add(c.Name(), NamespaceMismatch, namespaceWhy(c, pod.Namespace))
			case c.Set.Spec.InjectionStrategy.Paused:
				add(c.Name(), Paused, pausedWhy)
			case refused.SidecarSet == "" || refused.SidecarSet == c.Name():
				add(c.Name(), Refused, "the webhook denies the pod: "+refused.Error())
			default:
				add(c.Name(), RefusedWithOthers, fmt.Sprintf("it would inject, but the webhook denies the pod because of SidecarSet %q: %s", refused.SidecarSet, refused.Error()))
			}
		}
		return sorted(out)
	}
	var injected *corev1.Pod // the pod as injection leaves it, when a set computes resources
	for _, name := range res.Injected {
		c, _ := snap.Get(name)
		content, why := c, ""
		if i := slices.IndexFunc(res.Picks, func(pk inject.PickOf) bool { return pk.SidecarSet == name }); i >= 0 {
			content, why = res.Picks[i].Content, "; "+pickWhy(res.Picks[i].Pick)
			c = c.Latest() // running pods are brought to the current spec
		}
		if content.HasResourcesPolicy() && injected == nil {
			injected = res.Pod()
		}
		why = injectsWhy(content) + overridesWhy(content, p, res.Records[name].Overrides) + computedWhy(content, injected) + why
		out = append(out, Explanation{SidecarSet: name, Verdict: Injects, Why: why, Sidecars: sidecars(snap, p, c, candidates, opts)})
	}
	for _, s := range res.Skipped {
		c, _ := snap.Get(s.SidecarSet)
		switch s.Reason {
		case inject.NamespaceMismatch:
			add(s.SidecarSet, NamespaceMismatch, namespaceWhy(c, pod.Namespace))
		case inject.InjectionPaused:
			out = append(out, Explanation{SidecarSet: s.SidecarSet, Verdict: Paused, Why: pausedWhy, Sidecars: sidecars(snap, p, c, candidates, opts)})
		default:
			add(s.SidecarSet, Verdict(s.Reason), string(s.Reason))
		}
	}
	return sorted(out)
}

const pausedWhy = "spec.injectionStrategy.paused is true: new pods get nothing from it, pods it injected keep their sidecars"

func selectorWhy(c *inject.CompiledSet) string {
	return fmt.Sprintf("spec.selector %s does not match the pod's labels", metav1.FormatLabelSelector(c.Set.Spec.Selector))
}

func namespaceWhy(c *inject.CompiledSet, ns string) string {
	return fmt.Sprintf("spec.namespaceSelector %s does not match the labels of namespace %s", metav1.FormatLabelSelector(c.Set.Spec.NamespaceSelector), ns)
}

// pickWhy says which content a set that pins a revision with policy Partial gives the pod.
func pickWhy(pk inject.Pick) string {
	got := "the current spec"
	if pk.Pinned {
		got = "the pinned revision"
	}
	return fmt.Sprintf("spec.injectionStrategy.revision.policy is Partial and this pod gets %s: %s", got, pk.Why)
}

func injectsWhy(c *inject.CompiledSet) string {
	var names []string
	for _, l := range [][]appsv1alpha1.SidecarContainer{c.Set.Spec.InitContainers, c.Set.Spec.Containers} {
		for _, sc := range l {
			names = append(names, sc.Name)
		}
	}
	why := fmt.Sprintf("selected; injects %s at hash %s", strings.Join(names, ", "), c.Hash)
	if inject.PinsDigests(c.Set) {
		// Which bytes: the images as the revision pinned them (imagePolicy.pin Digest).
		// With imagePolicy.verify, who signed each.
		signers := map[string]string{}
		for _, img := range c.Set.Status.Images {
			if img.Verified != nil && img.Verified.Digest == img.Digest {
				signers[inject.PinnedImage(img.Image, img.Digest)] = img.Verified.Signer
			}
		}
		var images []string
		for _, l := range [][]appsv1alpha1.SidecarContainer{c.Set.Spec.InitContainers, c.Set.Spec.Containers} {
			for _, sc := range l {
				entry := sc.Name + " " + sc.Image
				if s, ok := signers[sc.Image]; ok && c.Set.Spec.ImagePolicy.Verify != nil {
					entry += " signed by " + s
				}
				images = append(images, entry)
			}
		}
		why += " (images pinned: " + strings.Join(images, ", ") + ")"
	}
	return why
}

// overridesWhy says which of the set's fields the pod overrides (spec.overrides) and with
// what: applied is what injecting the pod now applies; a pod that exists has the values its
// record says were applied, and an annotation changed since is named, to take effect when the
// pod is recreated.
func overridesWhy(c *inject.CompiledSet, p Pod, applied map[string]string) string {
	values := applied
	var parts []string
	if p.Existing {
		rec, _, distrusted, err := inject.ReadRecord(p.Pod.Annotations, c, nil)
		if err != nil {
			return ""
		}
		values = rec.Overrides
		parts = append(parts, distrusted...)
	}
	for _, o := range c.Set.Spec.Overrides {
		target := fmt.Sprintf("%s %s", o.Container, o.Field)
		if o.Field == appsv1alpha1.OverrideEnv {
			target = fmt.Sprintf("%s env %s", o.Container, o.EnvName)
		}
		was, recorded := values[o.Annotation]
		now, has := p.Pod.Annotations[o.Annotation]
		switch {
		case recorded && (!p.Existing || has && now == was):
			parts = append(parts, fmt.Sprintf("%s=%s (annotation %s)", target, was, o.Annotation))
		case recorded:
			parts = append(parts, fmt.Sprintf("%s=%s (annotation %s, changed since injection: the new value takes effect when the pod is recreated)", target, was, o.Annotation))
		case p.Existing && has:
			parts = append(parts, fmt.Sprintf("%s as declared (annotation %s was set after injection: it takes effect when the pod is recreated)", target, o.Annotation))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; the pod overrides " + strings.Join(parts, ", ")
}

// computedWhy says what the set's resourcesPolicy computes for the pod's sidecars, as injected
// shows them (nil when the set has no resourcesPolicy).
func computedWhy(c *inject.CompiledSet, injected *corev1.Pod) string {
	if injected == nil || !c.HasResourcesPolicy() {
		return ""
	}
	var parts []string
	for _, l := range []struct {
		declared []appsv1alpha1.SidecarContainer
		pod      []corev1.Container
	}{{c.Set.Spec.InitContainers, injected.Spec.InitContainers}, {c.Set.Spec.Containers, injected.Spec.Containers}} {
		for _, sc := range l.declared {
			if sc.ResourcesPolicy == nil {
				continue
			}
			if i := slices.IndexFunc(l.pod, func(pc corev1.Container) bool { return pc.Name == sc.Name }); i >= 0 {
				parts = append(parts, sc.Name+" "+resourcesText(l.pod[i].Resources))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; resourcesPolicy computes from the pod's containers " + strings.Join(parts, ", ")
}

// resourcesText is "requests cpu=150m memory=64Mi, limits memory=64Mi".
func resourcesText(r corev1.ResourceRequirements) string {
	list := func(kind string, l corev1.ResourceList) string {
		if len(l) == 0 {
			return ""
		}
		names := slices.Sorted(maps.Keys(l))
		parts := make([]string, len(names))
		for i, n := range names {
			q := l[n]
			parts[i] = string(n) + "=" + q.String()
		}
		return kind + " " + strings.Join(parts, " ")
	}
	var out []string
	for _, s := range []string{list("requests", r.Requests), list("limits", r.Limits)} {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return "no requests or limits"
	}
	return strings.Join(out, ", ")
}

// sidecars compares what the set injected into an existing Pod with the set's content.
func sidecars(snap *snapshot.Snapshot, p Pod, c *inject.CompiledSet, candidates []*inject.CompiledSet, opts Options) string {
	if !p.Existing || c == nil {
		return ""
	}
	hash, ok := inject.InjectedHash(p.Pod.Annotations, c.Name())
	strategy := c.Set.Spec.UpdateStrategy
	rolling := strategy.Type == appsv1alpha1.RollingUpdate
	switch {
	case !ok && rolling && strategy.Remediate == appsv1alpha1.RecreateEvict:
		return "not injected: the pod was created before the SidecarSet selected it (or while it was paused); " + Recreation(p.Pod, c)
	case !ok:
		return "not injected: the pod was created before the SidecarSet selected it (or while it was paused); recreate it to inject"
	case hash == c.Hash:
		// Patched, but the kubelet does not run it yet: restarting, not current.
		if r, restarting := rollout.RestartOf(c, p.Pod); restarting {
			return r.Describe(opts.Now)
		}
		return "current (hash " + hash + ")"
	case c.Set.Spec.UpdateStrategy.Type != appsv1alpha1.RollingUpdate:
		return fmt.Sprintf("outdated (hash %s, the set is at %s): spec.updateStrategy.type is %s, so running pods keep their sidecars; recreate the pod or use RollingUpdate",
			hash, c.Hash, orDefault(string(c.Set.Spec.UpdateStrategy.Type), string(appsv1alpha1.NotUpdate)))
	}
	var injected *inject.CompiledSet
	if opts.Injected != nil {
		injected = opts.Injected(c, hash)
	}
	u, err := inject.UpdateInPlace(inject.Input{Pod: p.Pod, Sets: candidates, NamespaceLabels: p.NamespaceLabels, SetByName: snap.Get,
		AllowedAnnotations: opts.AllowedAnnotations}, c.Name(), injected)
	switch {
	case err != nil:
		return fmt.Sprintf("outdated (hash %s, the set is at %s): %v", hash, c.Hash, err)
	case len(u.Blocked) > 0 && u.Recreatable && injected != nil && strategy.Recreate == appsv1alpha1.RecreateEvict:
		return fmt.Sprintf("outdated (hash %s, the set is at %s) and not updatable in place (%s); %s", hash, c.Hash, strings.Join(u.Blocked, "; "), Recreation(p.Pod, c))
	case len(u.Blocked) > 0:
		return fmt.Sprintf("outdated (hash %s, the set is at %s) and not updatable in place: %s", hash, c.Hash, strings.Join(u.Blocked, "; "))
	}
	return fmt.Sprintf("outdated (hash %s, the set is at %s): the rolling update will update it in place (see `kubectl sidecarset status %s` for partition, pause and budget)",
		hash, c.Hash, c.Name())
}

// Recreation says whether the rolling update recreates the pod by eviction, or why not.
func Recreation(pod *corev1.Pod, c *inject.CompiledSet) string {
	owner, why := rollout.RecreatingController(pod)
	if owner == nil {
		return "the rolling update does not recreate it: " + why
	}
	return fmt.Sprintf("the rolling update evicts it and its %s %s recreates it with the current sidecars (PodDisruptionBudgets hold; see `kubectl sidecarset status %s` for the budget)",
		owner.Kind, owner.Name, c.Name())
}

// gateVerdict is the verdict for a Pod the engine's gate keeps from every set.
func gateVerdict(reason inject.GateReason) Verdict {
	switch reason {
	case inject.GateExcludedNamespace, inject.GateNamespaceOptedOut:
		return NamespaceExcluded
	default:
		return Verdict(reason)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sorted(out []Explanation) []Explanation {
	slices.SortFunc(out, func(a, b Explanation) int { return strings.Compare(a.SidecarSet, b.SidecarSet) })
	return out
}
