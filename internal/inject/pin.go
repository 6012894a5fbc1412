package inject

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Pick is which content of a SidecarSet a new Pod gets, and why.
type Pick struct {
	// Pinned is true when the Pod gets the pinned revision (spec.injectionStrategy.revision),
	// false when it gets the set's current spec.
	Pinned bool
	// Why says what decided it, for explain and for tests.
	Why string
}

// WithLatest returns c, which was compiled from the revision its SidecarSet pins with
// policy Partial, able to give new Pods the set's current spec too (latest, compiled from
// it). The versions share everything but their content; with equal content c is returned.
func (c *CompiledSet) WithLatest(latest *CompiledSet) (*CompiledSet, error) {
	if latest.Hash == c.Hash {
		return c, nil
	}
	out := *c
	out.latest = latest
	if sel := c.Set.Spec.UpdateStrategy.Selector; sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil, fmt.Errorf("SidecarSet %q: spec.updateStrategy.selector: %w", c.Name(), err)
		}
		out.updateSelector = s
	}
	return &out, nil
}

// Latest is the set's current spec compiled, when new Pods may get either it or the pinned
// revision (policy Partial); nil otherwise.
func (c *CompiledSet) Latest() *CompiledSet { return c.latest }

// version returns the content of c that a Pod's record of hash names: the current spec when
// c pins a revision with policy Partial and the record holds the current spec's hash, c
// otherwise.
func (c *CompiledSet) version(hash string) *CompiledSet {
	if c.latest != nil && hash == c.latest.Hash {
		return c.latest
	}
	return c
}

// Pick says which content of c a Pod gets: with policy Partial, the pinned revision (c)
// or the current spec (Latest), and why; c and a zero Pick otherwise. recorded is the hash of the Pod's record of the
// set, "" when it has none: a Pod injected before keeps what it got. key draws the Pod
// (its admission request's UID); an empty key draws by the Pod's namespace and name.
func (c *CompiledSet) Pick(pod *corev1.Pod, recorded, key string) (*CompiledSet, Pick) {
	if c.latest == nil {
		return c, Pick{}
	}
	switch strategy := &c.Set.Spec.UpdateStrategy; {
	case recorded == c.Hash:
		return c, Pick{Pinned: true, Why: "the pod's record names the pinned revision"}
	case recorded == c.latest.Hash:
		return c.latest, Pick{Why: "the pod's record names the current spec"}
	case strategy.Paused:
		return c, Pick{Pinned: true, Why: "spec.updateStrategy.paused is true"}
	case c.updateSelector != nil && !c.updateSelector.Matches(labels.Set(pod.Labels)):
		return c, Pick{Pinned: true, Why: "spec.updateStrategy.selector does not match the pod"}
	default:
		share := PinnedShare(strategy)
		draw := Draw(c.Name(), podKey(pod, key))
		by := ""
		if key == "" {
			by = " (drawn by the pod's name here; the webhook draws each new pod by its admission request)"
		}
		if draw < share {
			return c, Pick{Pinned: true, Why: fmt.Sprintf("drawn %.3f, below the %s share of spec.updateStrategy.partition%s", draw, percent(share), by)}
		}
		return c.latest, Pick{Why: fmt.Sprintf("drawn %.3f, not below the %s share of spec.updateStrategy.partition%s", draw, percent(share), by)}
	}
}

// PinnedShare is the share of new Pods that policy Partial gives the pinned revision:
// updateStrategy.partition as a fraction. The API server refuses a number there with
// Partial; a set read from a file may still have one, which counts as no share.
func PinnedShare(s *appsv1alpha1.UpdateStrategy) float64 {
	p := s.Partition
	if p == nil || p.Type != intstr.String {
		return 0
	}
	v, err := strconv.Atoi(strings.TrimSuffix(p.StrVal, "%"))
	if err != nil || v < 0 {
		return 0
	}
	return min(float64(v)/100, 1)
}

// Draw maps a set's name and a Pod's key to [0, 1), evenly: the same pair always draws the
// same number, and different sets draw independently for the same Pod.
func Draw(set, key string) float64 {
	sum := sha256.Sum256([]byte(set + "\x00" + key))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

func podKey(pod *corev1.Pod, key string) string {
	if key != "" {
		return key
	}
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	return pod.Namespace + "/" + name
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + "%" }

// PickOf is a SidecarSet's Pick for one Pod.
type PickOf struct {
	SidecarSet string
	Pick
	// Content is what the Pod got: the pinned revision or the current spec, compiled.
	Content *CompiledSet
}
