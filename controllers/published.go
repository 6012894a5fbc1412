package controllers

import (
	"maps"
	"slices"
	"sync"
)

// published is what one controller tells others about each SidecarSet (by name): the policy
// reconciler's PolicyState, the rollout reconciler's RolloutState. Readers subscribe to hear
// which sets changed. Safe for concurrent use.
type published[T any] struct {
	mu          sync.Mutex
	states      map[string]T
	equal       func(a, b T) bool
	subscribers []func(names []string)
}

func newPublished[T any](equal func(a, b T) bool) *published[T] {
	return &published[T]{states: map[string]T{}, equal: equal}
}

// Subscribe registers f to be called with the names of the sets whose state changed. f is
// called with the lock held: it must not block or call back.
func (p *published[T]) Subscribe(f func(names []string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subscribers = append(p.subscribers, f)
}

// Get returns the named set's state, if one was published.
func (p *published[T]) Get(name string) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.states[name]
	return st, ok
}

// set publishes one set's state.
func (p *published[T]) set(name string, st T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.states[name]; ok && p.equal(old, st) {
		return
	}
	p.states[name] = st
	p.tell([]string{name})
}

// remove forgets one set's state.
func (p *published[T]) remove(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.states[name]; !ok {
		return
	}
	delete(p.states, name)
	p.tell([]string{name})
}

// replace publishes every set's state at once (sets not in states are forgotten).
func (p *published[T]) replace(states map[string]T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var changed []string
	for name, st := range states {
		if old, ok := p.states[name]; !ok || !p.equal(old, st) {
			changed = append(changed, name)
		}
	}
	for name := range p.states {
		if _, ok := states[name]; !ok {
			changed = append(changed, name)
		}
	}
	p.states = maps.Clone(states)
	slices.Sort(changed)
	p.tell(changed)
}

func (p *published[T]) tell(names []string) {
	if len(names) == 0 {
		return
	}
	for _, f := range p.subscribers {
		f(names)
	}
}
