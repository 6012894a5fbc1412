package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The fuzzed selectors speak about two keys and three values; the brute force also tries a
// value no selector names ("other"), which is what Exists and NotIn are satisfied by.
var (
	fuzzKeys       = []string{"k1", "k2"}
	fuzzValues     = []string{"v1", "v2", "v3"}
	fuzzLabelValue = []string{"", "v1", "v2", "v3", "other"} // "" stands for an absent key
)

// FuzzSelectorsOverlap cross-checks SelectorsOverlap against brute force: over two keys, every
// label set built from {absent, v1, v2, v3, other} is tried against both selectors. Those
// label sets are enough: a requirement only distinguishes its own values from the rest, so
// any satisfying label set can be mapped onto one of them. It also checks that errors come
// exactly from selectors that LabelSelectorAsSelector refuses, that overlap is symmetric, and
// that the inputs are not modified.
func FuzzSelectorsOverlap(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x00, 0x09, 0x08, 0x00})                                                 // nil vs k1 DoesNotExist
	f.Add([]byte{0x09, 0x00, 0x00, 0x09, 0x00, 0x01})                                     // k1=v1 vs k1=v2
	f.Add([]byte{0x09, 0x02, 0x01, 0x09, 0x04, 0x01})                                     // k1 In [v1] vs k1 NotIn [v1]
	f.Add([]byte{0x09, 0x06, 0x00, 0x09, 0x08, 0x00})                                     // k1 Exists vs k1 DoesNotExist
	f.Add([]byte{0x19, 0x02, 0x03, 0x05, 0x06, 0x08, 0x00, 0x11, 0x03, 0x04, 0x04, 0x02}) // two keys, five requirements
	f.Add([]byte{0x09, 0x02, 0x00, 0x09, 0x06, 0xff})                                     // In without values vs Exists with values
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{data: data}
		a, b := decodeSelector(r), decodeSelector(r)
		origA, origB := a.DeepCopy(), b.DeepCopy()

		got, err := SelectorsOverlap(a, b)
		want, wantErr := bruteForceOverlap(t, a, b)
		if (err != nil) != wantErr {
			t.Fatalf("SelectorsOverlap(%v, %v) error = %v, want an error: %v", a, b, err, wantErr)
		}
		if err == nil && got != want {
			t.Fatalf("SelectorsOverlap(%v, %v) = %v, brute force says %v", a, b, got, want)
		}
		swapped, swappedErr := SelectorsOverlap(b, a)
		if swapped != got || (swappedErr != nil) != (err != nil) {
			t.Fatalf("not symmetric: (a, b) = %v, %v; (b, a) = %v, %v", got, err, swapped, swappedErr)
		}
		if !equality.Semantic.DeepEqual(a, origA) || !equality.Semantic.DeepEqual(b, origB) {
			t.Fatalf("SelectorsOverlap modified its inputs: %v, %v; were %v, %v", a, b, origA, origB)
		}
	})
}

// bruteForceOverlap tries every label set; wantErr is whether a selector cannot be parsed.
func bruteForceOverlap(t *testing.T, a, b *metav1.LabelSelector) (overlap, wantErr bool) {
	t.Helper()
	sa, errA := asSelector(a)
	sb, errB := asSelector(b)
	if errA != nil || errB != nil {
		return false, true
	}
	for _, v1 := range fuzzLabelValue {
		for _, v2 := range fuzzLabelValue {
			set := labels.Set{}
			for i, v := range []string{v1, v2} {
				if v != "" {
					set[fuzzKeys[i]] = v
				}
			}
			if sa.Matches(set) && sb.Matches(set) {
				return true, false
			}
		}
	}
	return false, false
}

// asSelector is metav1.LabelSelectorAsSelector, except that nil selects everything, as it does
// for a SidecarSet's namespace selector.
func asSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// byteReader hands out fuzz bytes, then zeros once they run out.
type byteReader struct {
	data []byte
}

func (r *byteReader) next() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

// decodeSelector builds a fresh selector from the next bytes: a header (nil when it is 0
// modulo 8, else (header>>3)%4 requirements), then two bytes per requirement.
func decodeSelector(r *byteReader) *metav1.LabelSelector {
	head := r.next()
	if head%8 == 0 {
		return nil
	}
	s := &metav1.LabelSelector{}
	for n := (head >> 3) % 4; n > 0; n-- {
		addRequirement(s, r.next(), r.next())
	}
	return s
}

// addRequirement adds one requirement: op picks the key (bit 0) and the kind ((op>>1)%5:
// matchLabels, In, NotIn, Exists, DoesNotExist); the low 3 bits of vals pick the values. An
// empty value list for In/NotIn, and (rarely) values for Exists/DoesNotExist, exercise the
// selectors LabelSelectorAsSelector refuses.
func addRequirement(s *metav1.LabelSelector, op, vals byte) {
	key := fuzzKeys[op&1]
	var values []string
	for i, v := range fuzzValues {
		if vals&(1<<i) != 0 {
			values = append(values, v)
		}
	}
	kind := (op >> 1) % 5
	if kind >= 3 && vals>>3 != 31 {
		values = nil
	}
	switch kind {
	case 0:
		if s.MatchLabels == nil {
			s.MatchLabels = map[string]string{}
		}
		s.MatchLabels[key] = fuzzValues[int(vals)%len(fuzzValues)]
	case 1:
		s.MatchExpressions = append(s.MatchExpressions, req(key, in, values...))
	case 2:
		s.MatchExpressions = append(s.MatchExpressions, req(key, notIn, values...))
	case 3:
		s.MatchExpressions = append(s.MatchExpressions, req(key, exists, values...))
	case 4:
		s.MatchExpressions = append(s.MatchExpressions, req(key, doesNotExist, values...))
	}
}
