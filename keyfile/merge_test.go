package keyfile

import (
	"reflect"
	"strings"
	"testing"
)

func TestMergeSshdKeepsLoadBearingKeys(t *testing.T) {
	base := []byte("Port 2222\nAllowUsers ops\nPasswordAuthentication yes\n")
	node := []byte("Port 2222\nAllowUsers ops deploy\nPasswordAuthentication yes\n")
	mesh := []byte("# mesh\nPort 22\nPasswordAuthentication no\nX11Forwarding no\n")
	r := Merge(Spaced, base, node, mesh, []string{"Port", "AllowUsers"}, nil)
	if len(r.Conflicts) != 0 {
		t.Fatalf("conflicts: %+v", r.Conflicts)
	}
	want := "# mesh\nPort 2222\nPasswordAuthentication no\nX11Forwarding no\nAllowUsers ops deploy\n"
	if string(r.Content) != want {
		t.Fatalf("content:\n%s\nwant:\n%s", r.Content, want)
	}
	if !reflect.DeepEqual(r.Kept, []string{"allowusers", "port"}) {
		t.Fatalf("kept %v", r.Kept)
	}
	if !reflect.DeepEqual(r.Changed, []string{"passwordauthentication"}) || !reflect.DeepEqual(r.Added, []string{"x11forwarding"}) {
		t.Fatalf("changed %v added %v", r.Changed, r.Added)
	}
}

func TestMergeRepeatedKeyKeptWhole(t *testing.T) {
	node := []byte("Port 22\nPort 2222\n")
	r := Merge(Spaced, node, node, []byte("Port 22\nUseDNS no\n"), []string{"port"}, nil)
	if string(r.Content) != "Port 22\nPort 2222\nUseDNS no\n" {
		t.Fatalf("got %q", r.Content)
	}
}

func TestMergeEnvConflictThenDecisions(t *testing.T) {
	base := []byte("MODE=prod\nLEVEL=info\n")
	node := []byte("MODE=prod\nLEVEL=debug\n") // changed on the node after custody
	mesh := []byte("MODE=prod\nLEVEL=warn\n")
	r := Merge(Env, base, node, mesh, nil, nil)
	if len(r.Conflicts) != 1 || r.Conflicts[0].Key != "LEVEL" || r.Content != nil {
		t.Fatalf("want one conflict on LEVEL and no content, got %+v %q", r.Conflicts, r.Content)
	}
	for _, v := range []string{"debug", "warn", "info"} {
		if strings.Contains(r.Conflicts[0].Why, v) {
			t.Fatalf("conflict text carries a value: %q", r.Conflicts[0].Why)
		}
	}
	r = Merge(Env, base, node, mesh, nil, map[string]Take{"LEVEL": TakeMesh})
	if string(r.Content) != "MODE=prod\nLEVEL=warn\n" || len(r.Conflicts) != 0 {
		t.Fatalf("take mesh: %q %+v", r.Content, r.Conflicts)
	}
	r = Merge(Env, base, node, mesh, nil, map[string]Take{"LEVEL": TakeNode})
	if string(r.Content) != "MODE=prod\nLEVEL=debug\n" {
		t.Fatalf("take node: %q", r.Content)
	}
}

func TestMergeNoConflictWhenNodeAgreesOrUnchanged(t *testing.T) {
	base := []byte("A=1\nB=2\n")
	// B changed on the node to exactly what the mesh sets: no conflict.
	r := Merge(Env, base, []byte("A=1\nB=3\n"), []byte("A=9\nB=3\n"), nil, nil)
	if len(r.Conflicts) != 0 || string(r.Content) != "A=9\nB=3\n" {
		t.Fatalf("%+v %q", r.Conflicts, r.Content)
	}
}

func TestMergeINISections(t *testing.T) {
	base := []byte("[server]\nport = 80\n[log]\nlevel = info\n")
	node := base
	mesh := []byte("[server]\nport = 8080\nworkers = 4\n")
	r := Merge(INI, base, node, mesh, []string{"server.port", "log.level"}, nil)
	want := "[server]\nport = 80\nworkers = 4\n[log]\nlevel = info\n"
	if string(r.Content) != want || len(r.Conflicts) != 0 {
		t.Fatalf("got %q, want %q (%+v)", r.Content, want, r.Conflicts)
	}
}

func TestMergeSshdMatchBlockScopesKeys(t *testing.T) {
	node := []byte("PasswordAuthentication no\nMatch User backup\n  PasswordAuthentication yes\n")
	v := Parse(Spaced, node).Values()
	if v["passwordauthentication"] != "PasswordAuthentication no" || v["user backup.passwordauthentication"] != "PasswordAuthentication yes" {
		t.Fatalf("values %#v", v)
	}
	// Keeping the Match block's key when the mesh has no Match block
	// repeats the node's header, so the key keeps its scope.
	r := Merge(Spaced, node, node, []byte("PasswordAuthentication no\n"), []string{"user backup.PasswordAuthentication"}, nil)
	if string(r.Content) != "PasswordAuthentication no\nMatch User backup\n  PasswordAuthentication yes\n" {
		t.Fatalf("got %q", r.Content)
	}
}

func TestInferAndParseFormat(t *testing.T) {
	for p, want := range map[string]Format{
		"/etc/ssh/sshd_config":            Spaced,
		"/etc/ssh/sshd_config.d/10.conf":  Spaced,
		"/srv/app/.env":                   Env,
		"/srv/app/prod.env":               Env,
		"/etc/default/ufw":                Env,
		"/etc/app/app.ini":                INI,
		"/etc/hosts":                      "",
		"/etc/nginx/nginx.conf":           "",
		"/etc/ssh/sshd_config.d/10.other": "",
	} {
		if got := Infer(p); got != want {
			t.Errorf("Infer(%s) = %q, want %q", p, got, want)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil || !strings.Contains(err.Error(), "yaml") {
		t.Fatalf("ParseFormat(yaml) = %v", err)
	}
}

func TestMaskNeverShowsTheValue(t *testing.T) {
	if m := Mask("hunter2"); strings.Contains(m, "hunter2") {
		t.Fatal(m)
	}
	if Mask("a\nb") != "(masked, 2 lines)" || Mask("") != "(empty)" {
		t.Fatal(Mask("a\nb"), Mask(""))
	}
}
