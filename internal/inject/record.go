package inject

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Record is what one SidecarSet injected into a Pod. The sidecarset.io/status annotation holds
// a JSON object mapping SidecarSet names to Records; it lists only what the SidecarSet added, so
// stripping it restores the Pod as written.
type Record struct {
	Hash             string   `json:"hash"`
	Containers       []string `json:"containers,omitempty"`
	InitContainers   []string `json:"initContainers,omitempty"`
	Volumes          []string `json:"volumes,omitempty"`
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`
	// NotShared lists the app containers' volume mounts that shareVolumePolicy left out of a
	// sidecar because they would not be valid there, each with the reason.
	NotShared []string `json:"notShared,omitempty"`
}

// Records maps SidecarSet names to what they injected.
type Records map[string]Record

// ParseRecords reads the status annotation. A missing annotation is an empty Records.
func ParseRecords(annotations map[string]string) (Records, error) {
	raw, ok := annotations[appsv1alpha1.StatusAnnotation]
	if !ok || raw == "" {
		return nil, nil
	}
	var r Records
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("annotation %s is not a JSON object of SidecarSet records (%v); "+
			"remove it and the containers it lists, or restore it as the operator wrote it",
			appsv1alpha1.StatusAnnotation, err)
	}
	return r, nil
}

// InjectedHash returns the hash the named SidecarSet injected the Pod with, or "" when the
// annotation does not name it. It never fails: a malformed annotation names no SidecarSet.
//
// Status computation calls it for every matched Pod, so it first looks for the record in the
// exact form Encode writes (names are DNS labels and hashes hex, so the key cannot occur
// elsewhere in the value) and parses the JSON only when that form is not found.
func InjectedHash(annotations map[string]string, setName string) (string, bool) {
	raw := annotations[appsv1alpha1.StatusAnnotation]
	if raw == "" {
		return "", false
	}
	key := `"` + setName + `":{"hash":"`
	if i := strings.Index(raw, key); i >= 0 && i == strings.LastIndex(raw, key) &&
		(i == 1 && raw[0] == '{' || i > 1 && raw[i-1] == ',') && json.Valid([]byte(raw)) {
		rest := raw[i+len(key):]
		if j := strings.IndexByte(rest, '"'); j >= 0 && isHex(rest[:j]) {
			return rest[:j], true
		}
	}
	r, err := ParseRecords(annotations)
	if err != nil {
		return "", false
	}
	rec, ok := r[setName]
	return rec.Hash, ok
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Encode renders the annotation value. encoding/json sorts map keys, so the output is
// deterministic.
func (r Records) Encode() string {
	raw, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("encoding records: %v", err)) // strings only: cannot fail
	}
	return string(raw)
}

// Names returns the SidecarSet names in the records, sorted.
func (r Records) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// trustRecords returns the part of the Pod's records the engine may act on, and warnings for
// the rest. The annotation is the Pod's own to write (an exported Pod carries it, and anyone
// creating a Pod can forge it), so an entry is trusted only for what it can prove was injected:
// a SidecarSet that exists, and names that set declares in the same list. Whatever else it
// lists is never stripped or replaced: it stays in the Pod as the Pod's own, and the entry
// leaves the record.
func trustRecords(recs Records, known func(string) (*CompiledSet, bool)) (Records, []string) {
	if len(recs) == 0 {
		return recs, nil
	}
	out := make(Records, len(recs))
	var warnings []string
	for _, name := range recs.Names() {
		rec := recs[name]
		set, ok := known(name)
		if !ok {
			warnings = append(warnings, fmt.Sprintf("annotation %s names SidecarSet %q, which does not exist; "+
				"what it lists is kept as the pod's own", appsv1alpha1.StatusAnnotation, name))
			continue
		}
		spec := &set.Set.Spec
		var dropped []string
		keep := func(kind string, names []string, declared sets.Set[string]) []string {
			var kept []string
			for _, n := range names {
				if declared.Has(n) {
					kept = append(kept, n)
				} else {
					dropped = append(dropped, kind+" "+strconv.Quote(n))
				}
			}
			return kept
		}
		trusted := Record{Hash: rec.Hash, NotShared: rec.NotShared}
		trusted.Containers = keep("container", rec.Containers, containerNames(spec.Containers))
		trusted.InitContainers = keep("init container", rec.InitContainers, containerNames(spec.InitContainers))
		trusted.Volumes = keep("volume", rec.Volumes, volumeNames(spec.Volumes))
		trusted.ImagePullSecrets = keep("image pull secret", rec.ImagePullSecrets, pullSecretNames(spec.ImagePullSecrets))
		if len(dropped) > 0 {
			warnings = append(warnings, fmt.Sprintf("annotation %s says SidecarSet %q injected %s, which it does not declare; "+
				"kept as the pod's own", appsv1alpha1.StatusAnnotation, name, strings.Join(dropped, ", ")))
		}
		out[name] = trusted
	}
	return out, warnings
}

func containerNames(list []appsv1alpha1.SidecarContainer) sets.Set[string] {
	out := sets.New[string]()
	for i := range list {
		out.Insert(list[i].Name)
	}
	return out
}

func volumeNames(list []corev1.Volume) sets.Set[string] {
	out := sets.New[string]()
	for i := range list {
		out.Insert(list[i].Name)
	}
	return out
}

func pullSecretNames(list []corev1.LocalObjectReference) sets.Set[string] {
	out := sets.New[string]()
	for i := range list {
		out.Insert(list[i].Name)
	}
	return out
}
