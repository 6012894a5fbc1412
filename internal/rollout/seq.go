package rollout

// seq is a sequence of the elements 0..n-1 in which an element's place is found, and an
// element taken out or put in at a place, in O(log n) (expected): a treap keyed by position,
// with parent links. Scattering moves a few Pods of a long run per term; moving them in a
// slice would cost the run's length per term.
type seq struct {
	left, right, parent, size []int
	prio                      []uint64
	root                      int
}

// nilElem is no element.
const nilElem int = -1

// newSeq is the sequence order, a permutation of 0..len(order)-1.
func newSeq(order []int) *seq {
	n := len(order)
	s := &seq{left: make([]int, n), right: make([]int, n), parent: make([]int, n), size: make([]int, n),
		prio: make([]uint64, n), root: nilElem}
	// The priorities only need to look random to keep the tree shallow; the order never
	// depends on them. A fixed xorshift sequence keeps the work reproducible.
	prio := uint64(0x9e3779b97f4a7c15)
	for _, e := range order {
		prio ^= prio << 13
		prio ^= prio >> 7
		prio ^= prio << 17
		s.left[e], s.right[e], s.parent[e], s.size[e], s.prio[e] = nilElem, nilElem, nilElem, 1, prio
		s.setRoot(s.merge(s.root, e))
	}
	return s
}

// len is how many elements the sequence holds.
func (s *seq) len() int { return s.sizeOf(s.root) }

func (s *seq) sizeOf(e int) int {
	if e == nilElem {
		return 0
	}
	return s.size[e]
}

func (s *seq) setLeft(e, child int) {
	s.left[e] = child
	if child != nilElem {
		s.parent[child] = e
	}
	s.size[e] = 1 + s.sizeOf(s.left[e]) + s.sizeOf(s.right[e])
}

func (s *seq) setRight(e, child int) {
	s.right[e] = child
	if child != nilElem {
		s.parent[child] = e
	}
	s.size[e] = 1 + s.sizeOf(s.left[e]) + s.sizeOf(s.right[e])
}

// merge joins the trees a and b, a's elements first, and returns the root.
func (s *seq) merge(a, b int) int {
	switch {
	case a == nilElem:
		return b
	case b == nilElem:
		return a
	case s.prio[a] > s.prio[b]:
		s.setRight(a, s.merge(s.right[a], b))
		return a
	default:
		s.setLeft(b, s.merge(a, s.left[b]))
		return b
	}
}

// split cuts the tree t into its first k elements and the rest, and returns both roots (their
// parent links are the caller's to clear).
func (s *seq) split(t, k int) (int, int) {
	if t == nilElem {
		return nilElem, nilElem
	}
	if s.sizeOf(s.left[t]) >= k {
		a, b := s.split(s.left[t], k)
		s.setLeft(t, b)
		return a, t
	}
	a, b := s.split(s.right[t], k-s.sizeOf(s.left[t])-1)
	s.setRight(t, a)
	return t, b
}

// splitRoot cuts the whole sequence at k.
func (s *seq) splitRoot(k int) (int, int) {
	a, b := s.split(s.root, k)
	for _, r := range [2]int{a, b} {
		if r != nilElem {
			s.parent[r] = nilElem
		}
	}
	return a, b
}

// setRoot makes t the whole sequence.
func (s *seq) setRoot(t int) {
	s.root = t
	if t != nilElem {
		s.parent[t] = nilElem
	}
}

// rank is e's place in the sequence, from 0.
func (s *seq) rank(e int) int {
	r := s.sizeOf(s.left[e])
	for p := s.parent[e]; p != nilElem; e, p = p, s.parent[p] {
		if s.right[p] == e {
			r += s.sizeOf(s.left[p]) + 1
		}
	}
	return r
}

// remove takes e, at place at, out of the sequence.
func (s *seq) remove(e, at int) {
	a, b := s.splitRoot(at)
	s.root = b
	_, c := s.splitRoot(1) // the first of b is e
	s.left[e], s.right[e], s.parent[e], s.size[e] = nilElem, nilElem, nilElem, 1
	s.setRoot(s.merge(a, c))
}

// insert puts e, out of the sequence, in at place at.
func (s *seq) insert(e, at int) {
	a, b := s.splitRoot(at)
	s.setRoot(s.merge(s.merge(a, e), b))
}

// inOrder is the sequence's elements in order.
func (s *seq) inOrder() []int {
	out := make([]int, 0, len(s.size))
	var stack []int
	for e := s.root; e != nilElem || len(stack) > 0; {
		for ; e != nilElem; e = s.left[e] {
			stack = append(stack, e)
		}
		e, stack = stack[len(stack)-1], stack[:len(stack)-1]
		out = append(out, e)
		e = s.right[e]
	}
	return out
}
