package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// quote renders s as a CEL string literal. A JSON string is one: its escapes (\" \\ \b \f \n
// \r \t \uXXXX) are all CEL escapes, and whatever it leaves raw is valid UTF-8.
func quote(s string) string {
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("encoding a string: %v", err)) // strings always encode
	}
	return string(raw)
}

// quoteAll renders names as a CEL list of string literals.
func quoteAll(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quote(n)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// literal renders v, a Kubernetes API value, as a CEL literal whose value is v's JSON. Every map
// value and list element is wrapped in dyn(): CEL requires the values of one map (and the
// elements of one list) to share a type, which a container's fields do not. Typed
// Object.spec...{} initializers are avoided on purpose: a JSONPatch value holding them panics
// API servers before 1.37 (kubernetes#142181).
func literal(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return "", err
	}
	var b strings.Builder
	if err := writeLiteral(&b, tree); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeLiteral(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		fmt.Fprint(b, v)
	case string:
		b.WriteString(quote(v))
	case json.Number:
		// Pod fields hold integers only (quantities are strings); a CEL int literal is its JSON.
		if _, err := v.Int64(); err != nil {
			return fmt.Errorf("number %s is not an integer", v)
		}
		b.WriteString(v.String())
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeDyn(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(k))
			b.WriteString(": ")
			if err := writeDyn(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected JSON value %T", v)
	}
	return nil
}

func writeDyn(b *strings.Builder, v any) error {
	b.WriteString("dyn(")
	if err := writeLiteral(b, v); err != nil {
		return err
	}
	b.WriteByte(')')
	return nil
}

// selectorCEL renders a label selector as a CEL condition on the label map labels (a CEL
// expression of type map(string, string)), with metav1.LabelSelector's meaning: every
// requirement holds; NotIn and DoesNotExist hold when the key is absent. A nil selector matches
// everything, as for a namespaceSelector.
func selectorCEL(sel *metav1.LabelSelector, labels string) (string, error) {
	if sel == nil {
		return "true", nil
	}
	var terms []string
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		terms = append(terms, fmt.Sprintf("(%s in %s && %s[%s] == %s)", quote(k), labels, labels, quote(k), quote(sel.MatchLabels[k])))
	}
	for _, r := range sel.MatchExpressions {
		has := fmt.Sprintf("%s in %s", quote(r.Key), labels)
		value := fmt.Sprintf("%s[%s]", labels, quote(r.Key))
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			terms = append(terms, fmt.Sprintf("(%s && %s in %s)", has, value, quoteAll(r.Values)))
		case metav1.LabelSelectorOpNotIn:
			terms = append(terms, fmt.Sprintf("(!(%s) || !(%s in %s))", has, value, quoteAll(r.Values)))
		case metav1.LabelSelectorOpExists:
			terms = append(terms, "("+has+")")
		case metav1.LabelSelectorOpDoesNotExist:
			terms = append(terms, "!("+has+")")
		default:
			return "", fmt.Errorf("unknown label selector operator %q", r.Operator)
		}
	}
	if len(terms) == 0 {
		return "true", nil
	}
	return strings.Join(terms, " && "), nil
}

// ConstantPatch renders ops, a JSON patch of adds, as the JSONPatch expression of a
// MutatingAdmissionPolicy that applies them as constants, reading nothing of the object: given
// the webhook's patch for a pod, the least any policy injecting the same sidecars costs the API
// server. It is the floor policy mode is measured against (make bench-scale).
func ConstantPatch(ops []jsonpatch.Operation) (string, error) {
	out := make([]string, len(ops))
	for i, op := range ops {
		if op.Operation != "add" {
			return "", fmt.Errorf("operation %d is %q: only adds are constants", i, op.Operation)
		}
		value, err := literal(op.Value)
		if err != nil {
			return "", fmt.Errorf("operation %d (%s): %w", i, op.Path, err)
		}
		out[i] = fmt.Sprintf("JSONPatch{op: %q, path: %s, value: %s}", op.Operation, quote(op.Path), value)
	}
	return "[" + strings.Join(out, ", ") + "]", nil
}
