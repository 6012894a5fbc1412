package main

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const rendered = `apiVersion: v1
kind: Namespace
metadata:
  name: sidecarset-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sidecarset-controller-manager
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: v
  annotations:
    cert-manager.io/inject-ca-from: sidecarset-system/serving-cert
webhooks:
- name: validate.sidecarset.io
  clientConfig:
    service: {name: svc, namespace: sidecarset-system, path: /validate}
  objectSelector: {matchLabels: {a: b}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sidecarsets.apps.sidecarset.io
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: m
  annotations:
    cert-manager.io/inject-ca-from: sidecarset-system/serving-cert
    keep: me
webhooks:
- name: inject.sidecarset.io
  clientConfig:
    service: {name: svc, namespace: sidecarset-system, path: /mutate-v1-pod}
`

func TestInstallManifests(t *testing.T) {
	out, err := installManifests([]byte(rendered), "https://127.0.0.1:9443", []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, it := range list.Items {
		kinds = append(kinds, it["kind"].(string))
	}
	if list.Kind != "List" || strings.Join(kinds, ",") != "Namespace,CustomResourceDefinition,MutatingWebhookConfiguration,ValidatingWebhookConfiguration" {
		t.Fatalf("kinds %v", kinds)
	}
	m, v := list.Items[2], list.Items[3]
	hook := m["webhooks"].([]any)[0].(map[string]any)
	if cc := hook["clientConfig"].(map[string]any); cc["url"] != "https://127.0.0.1:9443/mutate-v1-pod" || cc["caBundle"] != "Q0E=" || cc["service"] != nil {
		t.Errorf("mutating clientConfig %v", cc)
	}
	if ann := m["metadata"].(map[string]any)["annotations"].(map[string]any); ann["keep"] != "me" || ann["cert-manager.io/inject-ca-from"] != nil {
		t.Errorf("mutating annotations %v", ann)
	}
	if _, ok := v["metadata"].(map[string]any)["annotations"]; ok {
		t.Errorf("validating annotations left empty instead of removed: %v", v["metadata"])
	}
	vhook := v["webhooks"].([]any)[0].(map[string]any)
	if vhook["objectSelector"] == nil || vhook["clientConfig"].(map[string]any)["url"] != "https://127.0.0.1:9443/validate" {
		t.Errorf("validating webhook %v", vhook)
	}
}

func TestInstallManifestsRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"a kind missing":  strings.Split(rendered, "---\napiVersion: apiextensions")[0],
		"no service":      strings.Replace(rendered, "service: {name: svc, namespace: sidecarset-system, path: /validate}", "url: https://x", 1),
		"not YAML at all": "kind: [",
	} {
		if _, err := installManifests([]byte(in), "https://127.0.0.1:1", nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestJSONFieldAndNames(t *testing.T) {
	doc := []byte(`{"Dir": "/mod", "Origin": {"Hash": "abc"}, "items": [{"kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}}, {"kind": "Namespace", "metadata": {"name": "n"}}]}`)
	for _, tt := range []struct{ path, def, want string }{{"Dir", "", "/mod"}, {"Origin.Hash", "unknown", "abc"}, {"Origin.Nope", "unknown", "unknown"}} {
		if got, err := jsonField(doc, tt.path, tt.def, tt.def != ""); err != nil || got != tt.want {
			t.Errorf("jsonField(%s) = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
	if _, err := jsonField(doc, "Nope", "", false); err == nil {
		t.Error("jsonField of a missing path without a default: no error")
	}
	if names, err := listNames(doc, "CustomResourceDefinition", "crd"); err != nil || strings.Join(names, " ") != "crd/a.b" {
		t.Errorf("listNames = %v, %v", names, err)
	}
}

func TestFreePortsSkipsRecordedOnes(t *testing.T) {
	// Record the port the system would hand out next... we cannot know it; record many
	// instead and check none comes back.
	dir := t.TempDir()
	var recorded []string
	held := map[int]bool{}
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		held[p] = true
		recorded = append(recorded, "X_PORT="+strconv.Itoa(p))
		_ = l.Close()
	}
	env := filepath.Join(dir, "a.env")
	if err := os.WriteFile(env, []byte(strings.Join(recorded, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := freePorts(30, []string{env, filepath.Join(dir, "missing.env")})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if held[p] || seen[p] {
			t.Errorf("port %d is recorded or repeated", p)
		}
		seen[p] = true
	}
	if len(ports) != 30 {
		t.Errorf("%d ports, want 30", len(ports))
	}
}

// echoServer answers every connection with its name and closes it.
func echoServer(t *testing.T, name string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name))
			_ = c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// through sends one connection through the proxy's handler and returns what came back.
func through(t *testing.T, p *proxy) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		if c, err := l.Accept(); err == nil {
			p.handle(c)
		}
	}()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	_ = client.(*net.TCPConn).CloseWrite()
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(client)
	return string(got)
}

func TestProxyRoundRobinPreferenceAndFailOver(t *testing.T) {
	dir := t.TempDir()
	a, b := echoServer(t, "a"), echoServer(t, "b")
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	file := filepath.Join(dir, "backends")
	write := func(lines ...string) {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := newProxy(file)
	if got := through(t, p); got != "" {
		t.Errorf("no replicas: got %q", got)
	}
	write("a "+strconv.Itoa(a)+" 1", "b "+strconv.Itoa(b)+" 2", "garbage line")
	var seq []string
	for range 4 {
		seq = append(seq, through(t, p))
	}
	if strings.Join(seq, "") != "abab" {
		t.Errorf("round robin gave %v, want a b a b", seq)
	}
	p.mu.Lock()
	p.ready = map[string]bool{"b": true}
	p.mu.Unlock()
	for range 3 {
		if got := through(t, p); got != "b" {
			t.Errorf("with only b ready got %q", got)
		}
	}
	write("dead "+strconv.Itoa(dead)+" 3", "a "+strconv.Itoa(a)+" 1")
	p.mu.Lock()
	p.ready = map[string]bool{}
	p.mu.Unlock()
	for range 4 {
		if got := through(t, p); got != "a" {
			t.Errorf("a refused connection must fall over to a: got %q", got)
		}
	}
}
