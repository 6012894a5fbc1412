package controllers

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

func readyStatus(status metav1.ConditionStatus, reason, msg string, excluded int32, more ...metav1.Condition) appsv1alpha1.SidecarSetStatus {
	return appsv1alpha1.SidecarSetStatus{ExcludedPods: excluded, Conditions: append(more,
		metav1.Condition{Type: appsv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg})}
}

// TestRecordStatusEvents: an event for each change of the Ready condition's reason (with the detailed
// condition's message where there is one) and when selected pods first land in excluded
// namespaces; none when nothing an owner should hear about changed.
func TestRecordStatusEvents(t *testing.T) {
	conflict := metav1.Condition{Type: appsv1alpha1.ConditionConflict, Status: metav1.ConditionTrue, Reason: "StoppedByConflict", Message: `clashes with "mesh" on spec.containers[0].name`}
	ready := readyStatus(metav1.ConditionTrue, "Injecting", "valid", 0)
	for _, tc := range []struct {
		name     string
		old, now appsv1alpha1.SidecarSetStatus
		want     []string
	}{
		{"first status", appsv1alpha1.SidecarSetStatus{}, ready, []string{"Normal Injecting valid"}},
		{"nothing new", ready, ready, nil},
		{"same reason, new message", ready, readyStatus(metav1.ConditionTrue, "Injecting", "other", 0), nil},
		{"stopped by a conflict", ready, readyStatus(metav1.ConditionFalse, "StoppedByConflict", "summary", 0, conflict),
			[]string{`Warning StoppedByConflict clashes with "mesh" on spec.containers[0].name`}},
		{"rolling", ready, readyStatus(metav1.ConditionFalse, "RollingUpdateProgressing", "1 of 2", 0), []string{"Normal RollingUpdateProgressing 1 of 2"}},
		{"pods excluded", ready, readyStatus(metav1.ConditionTrue, "Injecting", "valid", 2), []string{"Warning PodsExcluded 2 pods the SidecarSet selects"}},
		{"still excluded", readyStatus(metav1.ConditionTrue, "Injecting", "valid", 2), readyStatus(metav1.ConditionTrue, "Injecting", "valid", 3), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &events.FakeRecorder{Events: make(chan string, 10)}
			r := &StatusReconciler{Recorder: rec}
			r.recordStatusEvents(&appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, &tc.old, &tc.now)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %q, want %d starting %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("event %q, want it to start %q", got[i], tc.want[i])
				}
			}
		})
	}
}

// TestPodEventsAreCapped: per set and revision, the first pods get their own event, the first
// one past the cap is announced on the set, and a new revision starts again.
func TestPodEventsAreCapped(t *testing.T) {
	m := &RolloutReconciler{States: NewRolloutStates()}
	type answer struct{ send, capped bool }
	var got []answer
	for _, hash := range []string{"a", "a", "a", "a", "b"} {
		send, capped := m.podEvent("agent", hash, 2)
		got = append(got, answer{send, capped})
	}
	want := []answer{{true, false}, {true, false}, {false, true}, {false, false}, {true, false}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pod %d: send %v, capped %v; want %v, %v", i, got[i].send, got[i].capped, want[i].send, want[i].capped)
		}
	}
	if send, _ := m.podEvent("other", "a", 2); !send {
		t.Error("another set shares the cap")
	}
	m.podEvent("agent", "b", 2)
	if send, _ := m.podEvent("agent", "b", 2); send {
		t.Fatal("the third pod of revision b got an event")
	}
	if err := m.stop(t.Context(), "agent"); err != nil {
		t.Fatal(err)
	}
	if send, _ := m.podEvent("agent", "b", 2); !send {
		t.Error("a dropped set kept its count")
	}
}
