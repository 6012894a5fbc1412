package inject

import (
	"encoding/json"
	"fmt"
	"maps"
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
	// NotShared lists the app containers' volume mounts and devices that shareVolumePolicy and
	// shareVolumeDevicePolicy left out of a sidecar because they would not be valid there, each
	// with the reason.
	NotShared []string `json:"notShared,omitempty"`
	// Annotations are the annotations the set patched (spec.patchPodMetadata), with the value
	// it left. A key whose value changed since is the Pod's own; a key the Pod kept its own
	// value of (patchPolicy Retain) is not listed.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Overrides are the values the Pod's annotations set in its sidecars (spec.overrides),
	// by annotation, as injection applied them. They are the set's content for this Pod: an
	// in-place update keeps them, whatever the annotations say by then.
	Overrides map[string]string `json:"overrides,omitempty"`
	// Padded is what the set added to the Pod's pod-level resources (podResources: Pad). An
	// injection that replaces the set's sidecars takes back what the sidecars it removes
	// padded, computed from them: the amounts here are for people, never read back.
	Padded *corev1.ResourceRequirements `json:"padded,omitempty"`
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

// UnlistedSidecars names the set's containers and init containers that the Pod's record of the
// set does not list: the Pod brought its own container of that name, which injection took as
// carrying the sidecar (it held every field the set declares). Its other fields (command, args)
// are the Pod author's, so status does not count such a Pod as running the set's sidecars. Nil
// when the Pod has no record of the set or a record that cannot be read.
//
// Status calls it for every updated Pod, so, as InjectedHash, it reads the form Encode writes
// without the JSON decoder.
func UnlistedSidecars(annotations map[string]string, c *CompiledSet) []string {
	_, _, own := readInjection(annotations, c, true)
	return own
}

// unlisted names the sidecars c declares that has says the record does not list.
func unlisted(c *CompiledSet, has func(init bool, name string) bool) []string {
	var out []string
	for _, l := range []struct {
		declared []appsv1alpha1.SidecarContainer
		init     bool
	}{{c.Set.Spec.InitContainers, true}, {c.Set.Spec.Containers, false}} {
		for _, d := range l.declared {
			if !has(l.init, d.Name) {
				out = append(out, d.Name)
			}
		}
	}
	return out
}

// InjectedHash returns the hash the named SidecarSet injected the Pod with, or "" when the
// annotation does not name it. It never fails: a malformed annotation names no SidecarSet.
//
// Status computation calls it for every matched Pod, so it first reads the annotation with
// encodedHash, which takes only the form Encode writes, and parses the JSON only for any other
// form. Both give the same answer for every annotation (FuzzInjectedHash): a key that looks
// like the set's anywhere but at the top level of the object is no record of it.
func InjectedHash(annotations map[string]string, setName string) (string, bool) {
	raw := annotations[appsv1alpha1.StatusAnnotation]
	if raw == "" {
		return "", false
	}
	if hash, found, ok := encodedHash(raw, setName); ok {
		return hash, found
	}
	r, err := ParseRecords(annotations)
	if err != nil {
		return "", false
	}
	rec, ok := r[setName]
	return rec.Hash, ok
}

// encodedHash reads the hash recorded for setName from raw, found false when raw records no
// such set. ok is false, and raw must be parsed, unless raw is exactly in the form Encode
// writes: an object whose keys are plain strings in increasing order (so none repeats), each
// holding a record whose members are the Record fields in their order, hash first (so none
// repeats, none is unknown, and each has its type). Within that form ParseRecords reads what
// this reads; everything else (whitespace, escapes in names or hashes, other member orders, a
// null, nesting) is the JSON decoder's to read.
func encodedHash(raw, setName string) (hash string, found, ok bool) {
	rec, found, ok := encodedRecord(raw, setName, false)
	return rec.hash, found, ok
}

// encodedRecord reads the record of setName from raw as encodedHash does: its hash and, with
// names, the names its containers and initContainers list (ok is then false, and raw must be
// parsed, when one of them is not a plain string either).
func encodedRecord(raw, setName string, names bool) (rec encoded, found, ok bool) {
	c := cursor{s: raw}
	if !c.eat("{") {
		return encoded{}, false, false
	}
	if c.eat("}") {
		return encoded{}, false, c.i == len(raw)
	}
	for prev, first := "", true; ; first = false {
		name, ok := c.plain()
		if !ok || !first && name <= prev || !c.eat(":") {
			return encoded{}, false, false
		}
		r, ok := c.record(names && name == setName)
		if !ok {
			return encoded{}, false, false
		}
		if name == setName {
			rec, found = r, true
		}
		prev = name
		if c.eat("}") {
			return rec, found, c.i == len(raw)
		}
		if !c.eat(",") {
			return encoded{}, false, false
		}
	}
}

// encoded is what encodedRecord reads of a record: its hash, and its containers and
// initContainers lists as written (arrays of plain strings, "" when absent; see listed).
type encoded struct {
	hash                       string
	containers, initContainers string
}

// listed reports whether an array of plain strings as written (see encoded) holds name.
func listed(list, name string) bool {
	c := cursor{s: list}
	if !c.eat("[") {
		return false
	}
	for {
		v, ok := c.plain()
		if !ok {
			return false
		}
		if v == name {
			return true
		}
		if !c.eat(",") {
			return false
		}
	}
}

// recordLists are the list members of a Record as Encode writes them, in their order, and
// recordMaps its members that map strings to strings, after them.
var (
	recordLists = [...]string{`,"containers":`, `,"initContainers":`, `,"volumes":`, `,"imagePullSecrets":`, `,"notShared":`}
	recordMaps  = [...]string{`,"annotations":`, `,"overrides":`}
)

// cursor walks a record annotation in the form Encode writes (see encodedHash).
type cursor struct {
	s string
	i int
}

// eat consumes lit when it comes next.
func (c *cursor) eat(lit string) bool {
	if strings.HasPrefix(c.s[c.i:], lit) {
		c.i += len(lit)
		return true
	}
	return false
}

// record consumes a Record and returns its hash and, with names, the names its containers
// and initContainers list, each a plain string.
func (c *cursor) record(names bool) (encoded, bool) {
	if !c.eat(`{"hash":`) {
		return encoded{}, false
	}
	var rec encoded
	var ok bool
	if rec.hash, ok = c.plain(); !ok {
		return encoded{}, false
	}
	for i, member := range recordLists {
		if !c.eat(member) {
			continue
		}
		start := c.i
		if !c.list() {
			return encoded{}, false
		}
		if names && i < 2 {
			list := c.s[start:c.i]
			if !plainList(list) {
				return encoded{}, false
			}
			if i == 0 {
				rec.containers = list
			} else {
				rec.initContainers = list
			}
		}
	}
	for _, member := range recordMaps {
		if c.eat(member) && !c.object() {
			return encoded{}, false
		}
	}
	if c.eat(`,"padded":`) && !c.padded() {
		return encoded{}, false
	}
	return rec, c.eat("}")
}

// padded consumes a Record's padded member as Encode writes it: an object with limits and
// requests (each optional, in that order), each an object of strings.
func (c *cursor) padded() bool {
	if !c.eat("{") {
		return false
	}
	sep := ""
	for _, member := range [...]string{`"limits":`, `"requests":`} {
		if c.eat(sep + member) {
			if !c.object() {
				return false
			}
			sep = ","
		}
	}
	return c.eat("}")
}

// plainList reports whether s is an array of plain strings (see plain).
func plainList(s string) bool {
	c := cursor{s: s}
	if !c.eat("[") {
		return false
	}
	if c.eat("]") {
		return c.i == len(s)
	}
	for {
		if _, ok := c.plain(); !ok {
			return false
		}
		if c.eat("]") {
			return c.i == len(s)
		}
		if !c.eat(",") {
			return false
		}
	}
}

// object consumes an object of strings (its keys and values are not needed).
func (c *cursor) object() bool {
	if !c.eat("{") {
		return false
	}
	if c.eat("}") {
		return true
	}
	for c.str() && c.eat(":") && c.str() {
		if c.eat("}") {
			return true
		}
		if !c.eat(",") {
			return false
		}
	}
	return false
}

// plain consumes a string of printable ASCII without escapes (which decodes to itself) and
// returns it.
func (c *cursor) plain() (string, bool) {
	if !c.eat(`"`) {
		return "", false
	}
	for start := c.i; c.i < len(c.s); c.i++ {
		switch b := c.s[c.i]; {
		case b == '"':
			c.i++
			return c.s[start : c.i-1], true
		case b < 0x20 || b > 0x7e || b == '\\':
			return "", false
		}
	}
	return "", false
}

// list consumes an array of strings.
func (c *cursor) list() bool {
	if !c.eat("[") {
		return false
	}
	if c.eat("]") {
		return true
	}
	for c.str() {
		if c.eat("]") {
			return true
		}
		if !c.eat(",") {
			return false
		}
	}
	return false
}

// str consumes a JSON string, escapes included (its value is not needed).
func (c *cursor) str() bool {
	if !c.eat(`"`) {
		return false
	}
	for c.i < len(c.s) {
		b := c.s[c.i]
		c.i++
		switch {
		case b == '"':
			return true
		case b < 0x20:
			return false
		case b == '\\':
			if c.i >= len(c.s) {
				return false
			}
			e := c.s[c.i]
			c.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if c.i+4 > len(c.s) || !hexDigits(c.s[c.i:c.i+4]) {
					return false
				}
				c.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// hexDigits reports whether s is hexadecimal digits, of either case.
func hexDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
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
// creating or updating a Pod can forge it), so every path that acts on a record reads it here,
// and an entry is trusted only for what it can prove was injected:
//   - a SidecarSet that exists, and names that set declares in the same list;
//   - patched annotations under keys the operator allows sets to patch (allowed), outside its
//     own prefix: a key it does not allow is never removed or changed for a record's sake;
//   - overridden values that the set declares and its rules allow (see recordedOverrides).
//
// Whatever else it lists is never stripped or replaced: it stays in the Pod as the Pod's own,
// and the entry leaves the record. The warnings say what was left out, by set.
func trustRecords(recs Records, setByName func(string) (*CompiledSet, bool), allowed *KeyAllowList) (Records, distrust) {
	if len(recs) == 0 {
		return recs, nil
	}
	out := make(Records, len(recs))
	var untrusted distrust
	for _, name := range recs.Names() {
		rec := recs[name]
		set, ok := setByName(name)
		if ok {
			set = set.version(rec.Hash)
		}
		if !ok {
			untrusted = append(untrusted, distrusted{set: name, detail: fmt.Sprintf("annotation %s names SidecarSet %q, which does not exist; "+
				"what it lists is kept as the pod's own", appsv1alpha1.StatusAnnotation, name)})
			continue
		}
		trusted, why := trustRecord(rec, set, allowed)
		for _, d := range why {
			untrusted = append(untrusted, distrusted{set: name, detail: d})
		}
		out[name] = trusted
	}
	return out, untrusted
}

// trustRecord is the part of the Pod's record of set that the engine may act on (see
// trustRecords), and why the rest is not.
func trustRecord(rec Record, set *CompiledSet, allowed *KeyAllowList) (Record, []string) {
	spec := &set.Set.Spec
	var dropped, why []string
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
	// Padded only says that the set padded the pod-level resources: what to take back is
	// computed from the sidecars (unpad), never read from it.
	trusted := Record{Hash: rec.Hash, NotShared: rec.NotShared, Padded: rec.Padded.DeepCopy()}
	trusted.Containers = keep("container", rec.Containers, containerNames(spec.Containers))
	trusted.InitContainers = keep("init container", rec.InitContainers, containerNames(spec.InitContainers))
	trusted.Volumes = keep("volume", rec.Volumes, volumeNames(spec.Volumes))
	trusted.ImagePullSecrets = keep("image pull secret", rec.ImagePullSecrets, pullSecretNames(spec.ImagePullSecrets))
	if len(dropped) > 0 {
		why = append(why, fmt.Sprintf("annotation %s says SidecarSet %q injected %s, which it does not declare; "+
			"kept as the pod's own", appsv1alpha1.StatusAnnotation, set.Name(), strings.Join(dropped, ", ")))
	}
	var keys []string
	trusted.Annotations, keys = allowedAnnotations(rec.Annotations, allowed)
	if len(keys) > 0 {
		why = append(why, fmt.Sprintf("annotation %s says SidecarSet %q patched annotation %s, a key the operator does not let sets patch (%s); "+
			"kept as the pod's own", appsv1alpha1.StatusAnnotation, set.Name(), strings.Join(keys, ", "), AllowedKeysFlag))
	}
	var refused []string
	trusted.Overrides, refused = recordedOverrides(rec.Overrides, set)
	return trusted, append(why, refused...)
}

// distrusted is one thing a Pod's record claims of a set that the engine does not act on.
type distrusted struct {
	set, detail string
}

// distrust is what trustRecords left out of a Pod's records.
type distrust []distrusted

// warnings are the details, for admission's warnings.
func (d distrust) warnings() []string {
	out := make([]string, 0, len(d))
	for _, e := range d {
		out = append(out, e.detail)
	}
	return out
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

// allowedAnnotations is the recorded patched annotations under keys the operator lets sets
// patch (never its own prefix), and the other keys, quoted and sorted.
func allowedAnnotations(annotations map[string]string, allowed *KeyAllowList) (map[string]string, []string) {
	var out map[string]string
	var refused []string
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		if !allowed.Allows(k) {
			refused = append(refused, strconv.Quote(k))
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = annotations[k]
	}
	return out, refused
}

// ReadRecord reads the Pod's record of set c as the engine acts on it: only what the Pod's
// author could have had injected (see trustRecords), with why the rest is left out. found is
// false when the Pod holds no record of c; err says why the annotation cannot be read at all.
// Every reader outside the engine (explain, the plugin) goes through it, so none of them
// believes more of a record than admission and the rollout do.
func ReadRecord(annotations map[string]string, c *CompiledSet, allowed *KeyAllowList) (rec Record, found bool, distrusted []string, err error) {
	recs, err := ParseRecords(annotations)
	if err != nil {
		return Record{}, false, nil, err
	}
	raw, found := recs[c.Name()]
	if !found {
		return Record{}, false, nil, nil
	}
	rec, distrusted = trustRecord(raw, c.version(raw.Hash), allowed)
	return rec, true, distrusted, nil
}

// InjectionOf reads, in one pass over the Pod's record, what InjectedHash and UnlistedSidecars
// read: the hash set c injected the Pod with (found false when the record does not name c),
// and, when that hash is c's current one, the sidecars c declares that the record does not
// list. Status and the rollout classify every selected Pod by it, so a Pod's record is read
// once per classification.
func InjectionOf(annotations map[string]string, c *CompiledSet) (hash string, found bool, own []string) {
	return readInjection(annotations, c, false)
}

// readInjection reads the hash c injected the Pod with and, when every is true or the hash is
// c's current one, the sidecars c declares that the record does not list.
func readInjection(annotations map[string]string, c *CompiledSet, every bool) (hash string, found bool, own []string) {
	raw := annotations[appsv1alpha1.StatusAnnotation]
	if raw == "" {
		return "", false, nil
	}
	if e, found, ok := encodedRecord(raw, c.Name(), true); ok {
		if !found {
			return "", false, nil
		}
		if every || e.hash == c.Hash {
			own = unlisted(c, func(init bool, name string) bool {
				if init {
					return listed(e.initContainers, name)
				}
				return listed(e.containers, name)
			})
		}
		return e.hash, true, own
	}
	recs, err := ParseRecords(annotations)
	rec, found := recs[c.Name()]
	if err != nil || !found {
		return "", false, nil
	}
	if every || rec.Hash == c.Hash {
		own = unlisted(c, func(init bool, name string) bool {
			if init {
				return slices.Contains(rec.InitContainers, name)
			}
			return slices.Contains(rec.Containers, name)
		})
	}
	return rec.Hash, true, own
}
