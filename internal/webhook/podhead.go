package webhook

import (
	"encoding/json"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
)

// decodeHead decodes raw into v as unmarshal does, in one pass over the bytes: it reads the
// members headView has and checks the grammar of everything else as it steps over it. The
// JSON decoder first validates the whole pod and then walks it again field by field, and that
// was most of an admission's time (BenchmarkServeHTTP). Whatever this decoder does not take
// on itself (escaped or repeated keys, strings that need unescaping, a value of the wrong
// type, deep nesting, malformed input) is decoded by unmarshal, so results and errors are
// unmarshal's (FuzzDecodeHead).
//
// v's strings share raw's bytes (see share): raw must not be written afterwards.
func decodeHead(raw []byte, v *headView) error {
	var fast headView
	s := scanner{b: raw}
	if err := s.podHead(&fast); err == nil {
		if s.space(); s.i == len(raw) {
			*v = fast
			return nil
		}
	}
	return unmarshal(raw, v)
}

// maxHeadDepth bounds the nesting the fast decoder steps over; deeper input goes to the JSON
// decoder, which has its own limit.
const maxHeadDepth = 1000

func (s *scanner) podHead(v *headView) error {
	return s.fields(0, []string{"metadata", "spec"}, func(field int) error {
		if field == 0 {
			return s.nullOr(func() error { return s.podMeta(&v.Metadata) })
		}
		return s.nullOr(func() error { return s.podSpec(v) })
	})
}

func (s *scanner) podMeta(m *podMeta) error {
	return s.fields(1, []string{"name", "generateName", "namespace", "labels", "annotations"}, func(field int) error {
		switch field {
		case 0:
			return s.text(&m.Name)
		case 1:
			return s.text(&m.GenerateName)
		case 2:
			return s.text(&m.Namespace)
		case 3:
			return s.stringMap(&m.Labels)
		}
		return s.stringMap(&m.Annotations)
	})
}

func (s *scanner) podSpec(v *headView) error {
	spec := &v.Spec
	return s.fields(1, []string{"containers", "initContainers", "volumes", "imagePullSecrets", "hostNetwork", "resources"}, func(field int) error {
		switch field {
		case 0:
			return list(s, &spec.Containers, s.containerHead)
		case 1:
			return list(s, &spec.InitContainers, s.containerHead)
		case 2:
			return list(s, &spec.Volumes, func(v *volumeHead) error { return s.nameOnly(&v.Name) })
		case 3:
			return list(s, &spec.ImagePullSecrets, func(r *corev1.LocalObjectReference) error { return s.nameOnly(&r.Name) })
		case 5:
			return s.raw(&spec.Resources)
		}
		return s.boolean(&spec.HostNetwork)
	})
}

func (s *scanner) containerHead(c *containerHead) error {
	return s.fields(3, []string{"name", "env", "volumeMounts"}, func(field int) error {
		switch field {
		case 0:
			return s.text(&c.Name)
		case 1:
			return s.raw(&c.Env)
		}
		return s.raw(&c.VolumeMounts)
	})
}

// nameOnly reads an object's name and steps over the rest.
func (s *scanner) nameOnly(name *string) error {
	return s.fields(3, []string{"name"}, func(int) error { return s.text(name) })
}

// fields walks an object at nesting depth: for a key among names it calls read with the key's
// index, the scanner at its value; other members are checked and stepped over. A repeated
// field is left to the JSON decoder (which keeps the last, merging objects).
func (s *scanner) fields(depth int, names []string, read func(field int) error) error {
	var seen uint32
	return s.object(func(key []byte) error {
		for i, name := range names {
			if string(key) == name {
				if seen&(1<<i) != 0 {
					return errNotFast
				}
				seen |= 1 << i
				return read(i)
			}
		}
		return s.value(depth + 1)
	})
}

// text reads a string or null (which leaves into as it is).
func (s *scanner) text(into *string) error {
	return s.nullOr(func() error { return s.plain(into) })
}

// nullOr consumes null (which leaves a Go value as it is) or calls read.
func (s *scanner) nullOr(read func() error) error {
	if s.literal("null") {
		return nil
	}
	return read()
}

// plain reads a string that needs no unescaping: printable ASCII without quotes or
// backslashes, what names and label values are. Anything else is left to the JSON decoder.
func (s *scanner) plain(into *string) error {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return errNotFast
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			*into = share(s.b[s.i+1 : j])
			s.i = j + 1
			return nil
		case c < 0x20 || c >= 0x80 || c == '\\':
			return errNotFast
		}
	}
	return errNotFast
}

// quoted reads a string that plain leaves (escapes, bytes beyond ASCII) as the JSON decoder
// decodes it, invalid UTF-8 replaced as it replaces it; a string it refuses is left to it.
func (s *scanner) quoted() (string, error) {
	start := s.i
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", errNotFast
	}
	if err := s.validString(); err != nil {
		return "", err
	}
	var v string // escapes to the heap here only, not in the caller
	if unmarshal(s.b[start:s.i], &v) != nil {
		return "", errNotFast
	}
	return v, nil
}

// share returns b as a string that shares its bytes instead of copying them: the scanner
// reads bytes nobody writes afterwards (an AdmissionReview's body, read once, and the request's
// object within it, which handlers only read), so the strings it decodes can point into them.
// One admission's labels, annotations and names alone were a fifth of its allocations.
func share(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b)) //nolint:gosec // G103: audited; the bytes are never written (above)
}

func (s *scanner) stringMap(into *map[string]string) error {
	if s.literal("null") {
		*into = nil
		return nil
	}
	m := map[string]string{}
	err := s.object(func(key []byte) error {
		if !ascii(key) {
			return errNotFast // the JSON decoder replaces invalid UTF-8
		}
		var v string
		if err := s.plain(&v); err != nil {
			// Annotations often hold JSON (kubectl's last-applied-configuration, our own
			// record) or text beyond ASCII.
			var err error
			if v, err = s.quoted(); err != nil {
				return err
			}
		}
		m[share(key)] = v
		return nil
	})
	*into = m
	return err
}

func (s *scanner) boolean(into *bool) error {
	switch {
	case s.literal("true"):
		*into = true
	case s.literal("false"):
		*into = false
	case s.literal("null"):
	default:
		return errNotFast
	}
	return nil
}

// raw keeps a value's bytes, as json.RawMessage does (null included).
func (s *scanner) raw(into *json.RawMessage) error {
	start := s.i
	if err := s.value(3); err != nil {
		return err
	}
	*into = json.RawMessage(s.b[start:s.i])
	return nil
}

// list reads an array of objects into a new slice; null leaves it nil.
func list[T any](s *scanner, into *[]T, item func(*T) error) error {
	if s.literal("null") {
		*into = nil
		return nil
	}
	out := []T{}
	err := s.array(func() error {
		if s.literal("null") {
			var zero T
			out = append(out, zero)
			return nil
		}
		out = append(out, *new(T))
		return item(&out[len(out)-1])
	})
	*into = out
	return err
}

// array walks an array, calling item with the scanner at each element; item must consume it.
func (s *scanner) array(item func() error) error { return s.elements('[', ']', item) }

// literal consumes word if it comes next.
func (s *scanner) literal(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// value steps over one JSON value at nesting depth, checking its grammar.
func (s *scanner) value(depth int) error {
	if depth > maxHeadDepth {
		return errNotFast
	}
	s.space()
	if s.i >= len(s.b) {
		return errNotFast
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.validString()
	case c == '{':
		// Nobody reads these keys: checked as strings, never unescaped (managedFields has many).
		return s.elements('{', '}', func() error {
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return errNotFast
			}
			if err := s.validString(); err != nil {
				return err
			}
			s.space()
			if !s.skipByte(':') {
				return errNotFast
			}
			return s.value(depth + 1)
		})
	case c == '[':
		return s.array(func() error { return s.value(depth + 1) })
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case s.literal("true"), s.literal("false"), s.literal("null"):
		return nil
	}
	return errNotFast
}

// validString consumes a string, checking its escapes and that it has no control characters.
func (s *scanner) validString() error {
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return nil
		case c < 0x20:
			return errNotFast
		case c == '\\':
			if j+1 >= len(s.b) {
				return errNotFast
			}
			switch s.b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if j+5 >= len(s.b) {
					return errNotFast
				}
				for _, h := range s.b[j+2 : j+6] {
					if !isHex(h) {
						return errNotFast
					}
				}
				j += 5
			default:
				return errNotFast
			}
		}
	}
	return errNotFast
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number consumes a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	s.skipByte('-')
	switch {
	case s.skipByte('0'):
	case s.digits() == 0:
		return errNotFast
	}
	if s.skipByte('.') && s.digits() == 0 {
		return errNotFast
	}
	if s.skipByte('e') || s.skipByte('E') {
		if !s.skipByte('+') {
			s.skipByte('-')
		}
		if s.digits() == 0 {
			return errNotFast
		}
	}
	return nil
}

func (s *scanner) skipByte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
