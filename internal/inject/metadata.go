package inject

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	mergepatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// ReservedKeyPrefix is the prefix of the operator's own annotations and labels. No SidecarSet
// patches a key under it, whatever the allow-list says: the status record and the webhook route
// mark must stay the operator's to write.
const ReservedKeyPrefix = "sidecarset.io/"

// AllowedKeysFlag is the manager flag that sets the KeyAllowList, named in warnings.
const AllowedKeysFlag = "--patch-pod-metadata-allowed-keys"

// KeyAllowList is the operator's allow-list of the annotation keys SidecarSets may patch onto
// Pods: exact keys, and prefixes written `prefix/*` (every key whose name part follows that
// prefix). The zero value allows nothing.
type KeyAllowList struct {
	exact    sets.Set[string]
	prefixes []string
}

// ParseKeyAllowList reads the allow-list from its entries (exact keys or `prefix/*`).
func ParseKeyAllowList(entries []string) (KeyAllowList, error) {
	l := KeyAllowList{exact: sets.New[string]()}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
			continue
		case strings.HasSuffix(e, "/*"):
			prefix := strings.TrimSuffix(e, "*")
			if errs := validation.IsDNS1123Subdomain(strings.TrimSuffix(prefix, "/")); len(errs) > 0 {
				return KeyAllowList{}, fmt.Errorf("%s: %q: the part before /* must be a DNS subdomain: %s", AllowedKeysFlag, e, strings.Join(errs, "; "))
			}
			l.prefixes = append(l.prefixes, prefix)
		case strings.Contains(e, "*"):
			return KeyAllowList{}, fmt.Errorf("%s: %q: a wildcard is allowed only as a whole name after a prefix (example.com/*)", AllowedKeysFlag, e)
		default:
			if errs := validation.IsQualifiedName(e); len(errs) > 0 {
				return KeyAllowList{}, fmt.Errorf("%s: %q is not a valid annotation key: %s", AllowedKeysFlag, e, strings.Join(errs, "; "))
			}
			l.exact.Insert(e)
		}
	}
	return l, nil
}

// Allows reports whether a SidecarSet may patch the key.
func (l *KeyAllowList) Allows(key string) bool {
	if l == nil || strings.HasPrefix(key, ReservedKeyPrefix) {
		return false
	}
	if l.exact.Has(key) {
		return true
	}
	return slices.ContainsFunc(l.prefixes, func(p string) bool { return strings.HasPrefix(key, p) })
}

// patchOwner is the set that patched an annotation in this injection, with what it declared.
type patchOwner struct {
	set, value string
	policy     appsv1alpha1.PatchPolicy
}

// PolicyOf is the patch policy of an entry, defaulted.
func PolicyOf(p *appsv1alpha1.PatchPodMetadata) appsv1alpha1.PatchPolicy {
	if p.PatchPolicy == "" {
		return appsv1alpha1.PatchPolicyRetain
	}
	return p.PatchPolicy
}

// mergedKeys are the annotation keys the sets that recorded patches now declare with
// MergePatchJson: their value on the Pod is the base the next merge starts from, so it is
// not stripped (merging the same patch twice gives the same object).
func mergedKeys(recs Records, setByName func(string) (*CompiledSet, bool)) sets.Set[string] {
	out := sets.New[string]()
	for name := range recs {
		set, ok := setByName(name)
		if !ok {
			continue
		}
		set = set.version(recs[name].Hash)
		for i := range set.Set.Spec.PatchPodMetadata {
			p := &set.Set.Spec.PatchPodMetadata[i]
			if PolicyOf(p) == appsv1alpha1.PatchPolicyMergePatchJSON {
				out.Insert(sets.KeySet(p.Annotations).UnsortedList()...)
			}
		}
	}
	return out
}

// stripAnnotations takes out of the working annotations what an earlier injection patched and
// the Pod still holds as it was patched. A value someone changed since is the Pod's own now.
func (b *builder) stripAnnotations(old Records, merged sets.Set[string]) {
	b.annotations = make(map[string]string, len(b.pod.Annotations))
	for k, v := range b.pod.Annotations {
		b.annotations[k] = v
	}
	b.annotationOwner = map[string]patchOwner{}
	b.stripped = map[string]string{}
	for _, name := range old.Names() {
		for k, v := range old[name].Annotations {
			if cur, ok := b.pod.Annotations[k]; ok && cur == v && !merged.Has(k) {
				delete(b.annotations, k)
				b.stripped[k] = v
			}
		}
	}
}

// keepAnnotations puts back what a paused set patched earlier and returns the part the Pod
// still holds.
func (b *builder) keepAnnotations(set string, rec Record) map[string]string {
	var out map[string]string
	for k, v := range rec.Annotations {
		if cur, ok := b.pod.Annotations[k]; !ok || cur != v {
			continue
		}
		b.annotations[k] = v
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
		if _, owned := b.annotationOwner[k]; !owned {
			b.annotationOwner[k] = patchOwner{set: set, value: v} // no policy: a paused set's is not compared
		}
	}
	return out
}

// patchMetadata patches the set's annotations onto the working annotations and records them.
func (b *builder) patchMetadata(set *CompiledSet, rec *Record) error {
	for i := range set.Set.Spec.PatchPodMetadata {
		p := &set.Set.Spec.PatchPodMetadata[i]
		policy := PolicyOf(p)
		for _, k := range sets.List(sets.KeySet(p.Annotations)) {
			if !b.allowed.Allows(k) {
				b.warnings = append(b.warnings, fmt.Sprintf("SidecarSet %q: annotation %q of spec.patchPodMetadata[%d] is not patched: "+
					"the operator does not allow that key (%s)", set.Name(), k, i, AllowedKeysFlag))
				continue
			}
			v := p.Annotations[k]
			if o, ok := b.annotationOwner[k]; ok && o.set != set.Name() && o.policy != "" {
				if o.value != v || o.policy != policy {
					return &RefusedError{Reason: ReasonAnnotationClash, SidecarSet: set.Name(), Field: fmt.Sprintf("spec.patchPodMetadata[%d].annotations[%s]", i, k), Detail: fmt.Sprintf(
						"SidecarSet %q also patches annotation %q into this pod with a different value or policy; give both the same value and policy, or make their selectors disjoint", o.set, k)}
				}
			}
			next, patch, err := patchedValue(b.annotations, k, v, policy)
			if err != nil {
				return &RefusedError{Reason: ReasonAnnotationClash, SidecarSet: set.Name(), Field: fmt.Sprintf("spec.patchPodMetadata[%d].annotations[%s]", i, k), Detail: err.Error()}
			}
			b.annotationOwner[k] = patchOwner{set: set.Name(), value: v, policy: policy}
			if !patch {
				continue
			}
			b.annotations[k] = next
			if rec.Annotations == nil {
				rec.Annotations = map[string]string{}
			}
			rec.Annotations[k] = next
		}
	}
	return nil
}

// patchedValue is the key's value after the patch, and false when the policy leaves the Pod's
// own value alone.
func patchedValue(annotations map[string]string, key, value string, policy appsv1alpha1.PatchPolicy) (string, bool, error) {
	cur, has := annotations[key]
	switch {
	case policy == appsv1alpha1.PatchPolicyRetain && has:
		return "", false, nil
	case policy != appsv1alpha1.PatchPolicyMergePatchJSON:
		return value, true, nil
	case !has:
		cur = "{}" // so the value is written as every later merge writes it
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(cur), &obj); err != nil || obj == nil {
		return "", false, fmt.Errorf("the pod's annotation %q is not a JSON object, so patchPolicy MergePatchJson cannot merge into it; "+
			"make the pod's value a JSON object or use patchPolicy Overwrite", key)
	}
	merged, err := mergepatch.MergePatch([]byte(cur), []byte(value))
	if err != nil {
		return "", false, fmt.Errorf("merging into the pod's annotation %q: %w", key, err)
	}
	// Re-encode so the value is the same bytes however the inputs were spaced.
	var out map[string]any
	if err := json.Unmarshal(merged, &out); err != nil {
		return "", false, fmt.Errorf("merging into the pod's annotation %q: %w", key, err)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return "", false, fmt.Errorf("merging into the pod's annotation %q: %w", key, err)
	}
	return string(raw), true, nil
}

// annotationEdits are the changes of the working annotations against the Pod's, for the keys
// an injection stripped or patched.
func (b *builder) annotationEdits(into map[string]*string) {
	keys := sets.KeySet(b.stripped)
	for k := range b.annotationOwner {
		keys.Insert(k)
	}
	for k := range keys {
		now, has := b.annotations[k]
		was, had := b.pod.Annotations[k]
		switch {
		case has && (!had || now != was):
			into[k] = &now
		case !has && had:
			into[k] = nil
		}
	}
}
