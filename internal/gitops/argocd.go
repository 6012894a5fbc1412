package gitops

import (
	"context"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/sidecarset/sidecarset-operator/config/argocd"
)

// HealthStatus is an Argo CD health status.
type HealthStatus string

// The health statuses Argo CD accepts from a health check.
const (
	Healthy     HealthStatus = "Healthy"
	Progressing HealthStatus = "Progressing"
	Degraded    HealthStatus = "Degraded"
	Suspended   HealthStatus = "Suspended"
	Missing     HealthStatus = "Missing"
	Unknown     HealthStatus = "Unknown"
)

// Health is what a health check returns: a status and a message.
type Health struct {
	Status  HealthStatus
	Message string
}

// luaTimeout bounds a check's run, as Argo CD bounds it.
const luaTimeout = time.Second

// ArgoCD runs health.lua on obj as Argo CD runs a custom health check: a Lua state with only
// the package, base and table libraries (Argo CD opens string and math only for its built-in
// checks, or with useOpenLibs), the object as the global obj, and the table the script returns
// read as the health. A status Argo CD does not know gives Unknown, as in Argo CD.
func ArgoCD(obj map[string]any) (Health, error) {
	return runHealth(argocd.HealthLua, obj)
}

func runHealth(script string, obj map[string]any) (Health, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return Health{}, fmt.Errorf("opening the Lua library %q: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), luaTimeout)
	defer cancel()
	L.SetContext(ctx)
	value, err := toLua(L, obj)
	if err != nil {
		return Health{}, fmt.Errorf("obj: %w", err)
	}
	L.SetGlobal("obj", value)
	if err := L.DoString(script); err != nil {
		return Health{}, fmt.Errorf("running the health check: %w", err)
	}
	table, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("the health check returned %s, not a table", L.Get(-1).Type())
	}
	var h Health
	for _, f := range []struct {
		name string
		into *string
	}{{"status", (*string)(&h.Status)}, {"message", &h.Message}} {
		switch v := table.RawGetString(f.name).(type) {
		case lua.LString:
			*f.into = string(v)
		case *lua.LNilType:
		default:
			return Health{}, fmt.Errorf("the health check's %s is a %s, not a string", f.name, v.Type())
		}
	}
	switch h.Status {
	case Healthy, Progressing, Degraded, Suspended, Missing, Unknown:
		return h, nil
	}
	return Health{Status: Unknown, Message: fmt.Sprintf("the health check returned the status %q, which Argo CD does not know", h.Status)}, nil
}

// toLua converts a value of an object decoded from JSON into Lua: an object into a table
// keyed by its fields, an array into a table indexed from 1, numbers, booleans and strings
// into their Lua kinds, and null into nil. Any other Go type is an error: it cannot come from
// the API server.
func toLua(L *lua.LState, v any) (lua.LValue, error) {
	switch v := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(v), nil
	case string:
		return lua.LString(v), nil
	case int64:
		return lua.LNumber(v), nil
	case int:
		return lua.LNumber(v), nil
	case int32:
		return lua.LNumber(v), nil
	case float64:
		return lua.LNumber(v), nil
	case []any:
		t := L.CreateTable(len(v), 0)
		for i, item := range v {
			lv, err := toLua(L, item)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			t.RawSetInt(i+1, lv)
		}
		return t, nil
	case map[string]any:
		t := L.CreateTable(0, len(v))
		for key, item := range v {
			lv, err := toLua(L, item)
			if err != nil {
				return nil, fmt.Errorf(".%s: %w", key, err)
			}
			t.RawSetString(key, lv)
		}
		return t, nil
	}
	return nil, fmt.Errorf("a %T is not a JSON value", v)
}
