package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestLastStatusWrites: the watch event of our own status write is dropped, every other update
// passes; a status equal to the cache's is still written when the cache predates our last
// write and that write said something else.
func TestLastStatusWrites(t *testing.T) {
	set := func(rv string, matched int32) *appsv1alpha1.SidecarSet {
		return &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", ResourceVersion: rv},
			Status: appsv1alpha1.SidecarSetStatus{MatchedPods: matched}}
	}
	update := func(rv string) event.UpdateEvent {
		return event.UpdateEvent{ObjectOld: set("1", 0), ObjectNew: set(rv, 0)}
	}
	var w lastStatusWrites
	if !w.notOwnWrite(update("5")) {
		t.Fatal("an update before any write of ours was dropped")
	}
	if !w.mustWrite(set("4", 1), &set("4", 1).Status, &set("", 2).Status) {
		t.Fatal("a changed status was not written")
	}
	if w.mustWrite(set("4", 1), &set("4", 1).Status, &set("", 1).Status) {
		t.Fatal("an unchanged status was written with no write of ours pending")
	}
	w.recordWrite(set("5", 2), time.Now())
	if w.notOwnWrite(update("5")) {
		t.Error("the event of our own write passed")
	}
	if !w.notOwnWrite(update("6")) {
		t.Error("a later update (someone else's) was dropped")
	}
	// The cache still shows resourceVersion 4 with 1 matched; we wrote 2 at resourceVersion 5.
	if !w.mustWrite(set("4", 1), &set("4", 1).Status, &set("", 1).Status) {
		t.Error("status back at the cached value was not written while the API server holds our newer write")
	}
	if w.mustWrite(set("4", 1), &set("4", 1).Status, &set("", 2).Status) == false {
		t.Error("status differing from the cache was not written")
	}
	if w.mustWrite(set("5", 2), &set("5", 2).Status, &set("", 2).Status) {
		t.Error("the cache shows our write and nothing changed, yet a write was asked for")
	}
	w.forgetSet("agent")
	if !w.notOwnWrite(update("5")) {
		t.Error("after forgetSet, the event was still taken for ours")
	}
}

// TestWaitBeforeWrite: writes of one set are spaced by the interval, measured from the last
// write; other sets and forgotten sets do not wait.
func TestWaitBeforeWrite(t *testing.T) {
	var w lastStatusWrites
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	interval := 250 * time.Millisecond
	if got := w.waitBeforeWrite("agent", t0, interval); got != 0 {
		t.Fatalf("before any write: wait %v, want 0", got)
	}
	w.recordWrite(&appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", ResourceVersion: "5"}}, t0)
	for _, tc := range []struct {
		name  string
		set   string
		after time.Duration
		want  time.Duration
	}{
		{"just written", "agent", 0, interval},
		{"within the interval", "agent", 100 * time.Millisecond, 150 * time.Millisecond},
		{"at its end", "agent", interval, 0},
		{"long after", "agent", time.Minute, 0},
		{"another set", "proxy", 0, 0},
	} {
		if got := w.waitBeforeWrite(tc.set, t0.Add(tc.after), interval); got != tc.want {
			t.Errorf("%s: wait %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := w.waitBeforeWrite("agent", t0, 0); got != 0 {
		t.Errorf("no interval: wait %v, want 0", got)
	}
	w.forgetSet("agent")
	if got := w.waitBeforeWrite("agent", t0, interval); got != 0 {
		t.Errorf("after forget: wait %v, want 0", got)
	}
}
