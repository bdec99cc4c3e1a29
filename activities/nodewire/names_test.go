// This file tests that the names the workflows call the node's activities
// by have the signatures of the activities the agent registers, so a
// workflow never schedules an activity with arguments the agent cannot
// decode.

package nodewire_test

import (
	"reflect"
	"testing"

	"adoption/activities"
	"adoption/activities/nodewire"
	"adoption/activities/watch"
)

// sameMethods fails the test for every method of stub that real lacks or
// has with another signature.
func sameMethods(t *testing.T, stub, real any) {
	t.Helper()
	st, rt := reflect.TypeOf(stub), reflect.TypeOf(real)
	if st.NumMethod() == 0 {
		t.Fatalf("%s has no methods", st)
	}
	for i := range st.NumMethod() {
		sm := st.Method(i)
		rm, ok := rt.MethodByName(sm.Name)
		if !ok {
			t.Errorf("%s.%s: %s has no such activity", st, sm.Name, rt)
			continue
		}
		if d := differ(sm.Type, rm.Type); d != "" {
			t.Errorf("%s.%s: %s, but %s's is %s", st, sm.Name, sm.Type, rt, rm.Type)
		}
	}
}

// differ says how two method types differ, their receivers aside, or "".
func differ(a, b reflect.Type) string {
	if a.NumIn() != b.NumIn() || a.NumOut() != b.NumOut() {
		return "arity"
	}
	for i := 1; i < a.NumIn(); i++ {
		if a.In(i) != b.In(i) {
			return "argument " + a.In(i).String()
		}
	}
	for i := range a.NumOut() {
		if a.Out(i) != b.Out(i) {
			return "result " + a.Out(i).String()
		}
	}
	return ""
}

func TestNamesHaveTheAgentsSignatures(t *testing.T) {
	sameMethods(t, (*nodewire.Activities)(nil), (*activities.Activities)(nil))
	sameMethods(t, (*nodewire.Watcher)(nil), (*watch.Watcher)(nil))
}

// TestAgentRegistersOnlyWhatWorkflowsName: the agent registers every
// exported method of activities.Activities and watch.Watcher with
// Temporal, so each must be one the workflows name here. A method the
// agent has and no workflow schedules is still an activity anyone who
// reaches the node's task queue can ask for (the watch's own checks are
// activities.Checks, not activities).
func TestAgentRegistersOnlyWhatWorkflowsName(t *testing.T) {
	sameMethods(t, (*activities.Activities)(nil), (*nodewire.Activities)(nil))
	sameMethods(t, (*watch.Watcher)(nil), (*nodewire.Watcher)(nil))
}

// The comparison can fail: a method with another signature, and one the
// real type lacks, are both found.
func TestDifferingSignaturesAreFound(t *testing.T) {
	type real struct{}
	if d := differ(reflect.TypeOf(func(real, int) error { return nil }), reflect.TypeOf(func(real, string) error { return nil })); d == "" {
		t.Error("int and string arguments found the same")
	}
	if d := differ(reflect.TypeOf(func(real) (int, error) { return 0, nil }), reflect.TypeOf(func(real) (*int, error) { return nil, nil })); d == "" {
		t.Error("int and *int results found the same")
	}
	if _, ok := reflect.TypeOf((*activities.Activities)(nil)).MethodByName("NoSuchActivity"); ok {
		t.Error("a method that does not exist was found")
	}
}
