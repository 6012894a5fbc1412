package inject

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Source is an entry of one of the Pod's app containers: Index into the env, volumeMounts or
// volumeDevices list of spec.containers[Container].
type Source struct {
	Container, Index int
}

// Copies says which entries of a rendered sidecar were copied from the app containers (by
// transferEnv, shareVolumePolicy and shareVolumeDevicePolicy): sidecar env, volumeMounts or
// volumeDevices index -> where it came from.
type Copies struct {
	Env, VolumeMounts, VolumeDevices map[int]Source
}

func (c *Copies) noteEnv(at int, from Source) {
	if c.Env == nil {
		c.Env = map[int]Source{}
	}
	c.Env[at] = from
}

func (c *Copies) noteVolumeMount(at int, from Source) {
	if c.VolumeMounts == nil {
		c.VolumeMounts = map[int]Source{}
	}
	c.VolumeMounts[at] = from
}

func (c *Copies) noteVolumeDevice(at int, from Source) {
	if c.VolumeDevices == nil {
		c.VolumeDevices = map[int]Source{}
	}
	c.VolumeDevices[at] = from
}

func (c *Copies) empty() bool {
	return len(c.Env) == 0 && len(c.VolumeMounts) == 0 && len(c.VolumeDevices) == 0
}

// appEntries are the env, volumeMounts and volumeDevices entries of the Pod's app containers
// as the admitted JSON has them, fields this binary does not know included.
type appEntries struct {
	Spec struct {
		Containers []struct {
			Env           []json.RawMessage `json:"env"`
			VolumeMounts  []json.RawMessage `json:"volumeMounts"`
			VolumeDevices []json.RawMessage `json:"volumeDevices"`
		} `json:"containers"`
	} `json:"spec"`
}

// Admitted gives the JSON, as admitted, of an entry of an app container's env, volumeMounts
// or volumeDevices (list is "env", "volumeMounts" or "volumeDevices") when it may hold fields
// this build's API types do not know; nil when it certainly does not, and the decoded entry is
// all of it.
type Admitted func(list string, s Source) (json.RawMessage, error)

// AdmittedFrom is the Admitted of raw, the admitted Pod's JSON: it returns every entry. A
// caller that decoded the Pod already can do better, as the admission webhook does: it keeps
// only the lists that had fields its types lack.
func AdmittedFrom(raw []byte) (Admitted, error) {
	var apps appEntries
	if err := json.Unmarshal(raw, &apps); err != nil {
		return nil, fmt.Errorf("reading the app containers' env, volumeMounts and volumeDevices: %w", err)
	}
	return apps.entry, nil
}

func (a *appEntries) entry(list string, s Source) (json.RawMessage, error) {
	if s.Container >= len(a.Spec.Containers) {
		return nil, fmt.Errorf("the admitted pod has no spec.containers[%d]", s.Container)
	}
	c := a.Spec.Containers[s.Container]
	entries := c.Env
	switch list {
	case "volumeMounts":
		entries = c.VolumeMounts
	case "volumeDevices":
		entries = c.VolumeDevices
	}
	if s.Index >= len(entries) {
		return nil, fmt.Errorf("the admitted pod has no spec.containers[%d].%s[%d]", s.Container, list, s.Index)
	}
	return entries[s.Index], nil
}

// withUnknownFields renders a sidecar whose entries were partly copied from the app
// containers: each copied entry gets back the fields of the app's entry that this binary's
// API types dropped when decoding it (a newer API server's fields), at any depth. What the
// engine set on the copy itself (a rewritten value, a pinned containerName) is kept.
func withUnknownFields(c *corev1.Container, copies *Copies, admitted Admitted) (any, error) {
	type list struct {
		name   string
		copies map[int]Source
		typed  func(json.RawMessage) (any, error)
		raws   map[int]json.RawMessage // the copied entries whose admitted JSON may hold more
	}
	lists := []list{
		{name: "env", copies: copies.Env, typed: func(raw json.RawMessage) (any, error) { return roundTrip[corev1.EnvVar](raw) }},
		{name: "volumeMounts", copies: copies.VolumeMounts, typed: func(raw json.RawMessage) (any, error) { return roundTrip[corev1.VolumeMount](raw) }},
		{name: "volumeDevices", copies: copies.VolumeDevices, typed: func(raw json.RawMessage) (any, error) { return roundTrip[corev1.VolumeDevice](raw) }},
	}
	more := false
	for i := range lists {
		l := &lists[i]
		for at, from := range l.copies {
			raw, err := admitted(l.name, from)
			if err != nil {
				return nil, err
			}
			if raw != nil {
				if l.raws == nil {
					l.raws = map[int]json.RawMessage{}
				}
				l.raws[at], more = raw, true
			}
		}
	}
	if !more {
		return c, nil // the common case: the decoded entries are all there is
	}
	obj, err := toObject(c)
	if err != nil {
		return nil, err
	}
	for _, l := range lists {
		entries, _ := obj[l.name].([]any)
		for at, raw := range l.raws {
			from := l.copies[at]
			known, err := l.typed(raw)
			if err != nil {
				return nil, fmt.Errorf("spec.containers[%d].%s[%d]: %w", from.Container, l.name, from.Index, err)
			}
			var whole any
			if err := decodeJSON(raw, &whole); err != nil {
				return nil, err
			}
			if at < len(entries) {
				keepUnknown(entries[at], whole, known)
			}
		}
	}
	b, err := json.Marshal(obj)
	return json.RawMessage(b), err
}

// keepUnknown adds to dst the keys of the object src that known (src as this binary's types
// see it) lacks, recursing into objects both have. dst's own keys always win.
func keepUnknown(dst, src, known any) {
	d, ok1 := dst.(map[string]any)
	s, ok2 := src.(map[string]any)
	k, _ := known.(map[string]any)
	if !ok1 || !ok2 {
		return
	}
	for key, v := range s {
		kv, isKnown := k[key]
		switch dv, has := d[key]; {
		case !isKnown && !has:
			d[key] = v
		case isKnown && has:
			keepUnknown(dv, v, kv)
		}
	}
}

// roundTrip is raw as this binary sees it: decoded into T and encoded again, as a generic
// JSON value.
func roundTrip[T any](raw json.RawMessage) (any, error) {
	var typed T
	if err := json.Unmarshal(raw, &typed); err != nil {
		return nil, err
	}
	b, err := json.Marshal(&typed)
	if err != nil {
		return nil, err
	}
	var out any
	return out, decodeJSON(b, &out)
}

func toObject(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	return obj, decodeJSON(b, &obj)
}

// decodeJSON decodes keeping numbers as written (no float64 rounding of large integers).
func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}
