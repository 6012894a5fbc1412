package inject

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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
