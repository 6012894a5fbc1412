package gitops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset-operator/config/argocd"
)

// TestObjectInLua: the object reaches the script as Argo CD gives it: objects as tables by
// field, arrays indexed from 1, numbers, booleans, strings; null and absent fields are nil.
func TestObjectInLua(t *testing.T) {
	obj := map[string]any{
		"items":  []any{"first", "second", map[string]any{"n": int64(3)}},
		"gen":    int64(7),
		"ratio":  0.5,
		"small":  int32(2),
		"plain":  4,
		"on":     true,
		"off":    false,
		"none":   nil,
		"nested": map[string]any{"deeper": map[string]any{"name": "x"}},
	}
	script := `
local checks = {
  #obj.items == 3, obj.items[1] == "first", obj.items[2] == "second", obj.items[3].n == 3, obj.items[0] == nil,
  obj.gen == 7, obj.gen + 1 == 8, obj.ratio == 0.5, obj.small == 2, obj.plain == 4,
  obj.on == true, obj.off == false, obj.none == nil, obj.absent == nil, obj.nested.deeper.name == "x",
}
local failed = ""
for i, ok in ipairs(checks) do
  if not ok then failed = failed .. " " .. tostring(i) end
end
if failed == "" then return {status = "Healthy", message = "all"} end
return {status = "Degraded", message = "failed:" .. failed}`
	h, err := runHealth(script, obj)
	if err != nil || h != (Health{Healthy, "all"}) {
		t.Errorf("%+v, %v; want every check to hold", h, err)
	}
	if _, err := runHealth(script, map[string]any{"c": complex(1, 2)}); err == nil || !strings.Contains(err.Error(), ".c: a complex128 is not a JSON value") {
		t.Errorf("a value JSON cannot hold: %v", err)
	}
}

// TestRunHealthAsArgoCD: what Argo CD accepts and refuses from a health check.
func TestRunHealthAsArgoCD(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         Health
		err          string
	}{
		{name: "a status and a message", script: `return {status = "Suspended", message = "paused"}`, want: Health{Suspended, "paused"}},
		{name: "no message", script: `local hs = {}; hs.status = "Healthy"; return hs`, want: Health{Status: Healthy}},
		{name: "a status Argo CD does not know", script: `return {status = "Fine"}`, want: Health{Status: Unknown}},
		{name: "not a table", script: `return "Healthy"`, err: "returned string, not a table"},
		{name: "a message that is not a string", script: `return {status = "Healthy", message = {}}`, err: "message is a table"},
		// Argo CD opens neither string nor math for custom checks.
		{name: "the string library", script: `return {status = string.upper("healthy")}`, err: "running the health check"},
		{name: "the math library", script: `return {status = "Healthy", message = tostring(math.max(1, 2))}`, err: "running the health check"},
		{name: "a loop Argo CD stops", script: `while true do end`, err: "running the health check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := runHealth(tc.script, map[string]any{})
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v; want one saying %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.err == "" && (h.Status != tc.want.Status || tc.want.Message != "" && h.Message != tc.want.Message):
				t.Errorf("%+v; want %+v", h, tc.want)
			}
		})
	}
}

// TestSnippetsCarryTheHealthCheck: the Argo CD snippets under config/argocd carry health.lua
// as it is now (make argocd writes them; run it after changing health.lua).
func TestSnippetsCarryTheHealthCheck(t *testing.T) {
	for file, path := range map[string][]string{"argocd-cm.yaml": {"data"}, "argo-cd-values.yaml": {"configs", "cm"}} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "argocd", file))
		if err != nil {
			t.Fatal(err)
		}
		var data map[string]any
		if err := yaml.Unmarshal(raw, &data); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, key := range path {
			data, _ = data[key].(map[string]any)
		}
		if data["resource.customizations.health.apps.sidecarset.io_SidecarSet"] != argocd.HealthLua {
			t.Errorf("%s does not carry config/argocd/health.lua as it is: run make argocd", file)
		}
	}
}
