package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// resourcesPolicy translates the expressions of an OpenKruise resourcesPolicy, in place, into
// this operator's CEL (see inject.CompileResourceExpr); the fields are the same.
func (c *converter) resourcesPolicy(path string, m map[string]any) {
	p, ok := m["resourcesPolicy"].(map[string]any)
	if !ok {
		return
	}
	exprs, _ := p["resourcesExpr"].(map[string]any)
	for _, kind := range []string{"requests", "limits"} {
		list, _ := exprs[kind].(map[string]any)
		for name, v := range list {
			field := fmt.Sprintf("%s.resourcesPolicy.resourcesExpr.%s.%s", path, kind, name)
			expr, ok := v.(string)
			if !ok {
				c.refuse(field, "not a string expression")
				continue
			}
			out, err := kruiseExprToCEL(corev1.ResourceName(name), expr)
			if err != nil {
				c.refuse(field, fmt.Sprintf("%q: %v", expr, err))
				continue
			}
			list[name] = out
		}
	}
}

// kruiseExprToCEL translates an expression of OpenKruise's resource calculator into this
// operator's CEL, token by token: a percentage (50%) becomes a double (0.5), a quantity (50m,
// 200Mi) quantity('50m'), a plain number a double (2 becomes 2.0), names are lowercased (the
// calculator ignores case), and operators, parentheses, max and min stay as they are. The
// result must compile for the resource.
func kruiseExprToCEL(name corev1.ResourceName, expr string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(expr); {
		r := rune(expr[i])
		switch {
		case unicode.IsSpace(r):
			i++
			continue
		case unicode.IsDigit(r) || r == '.':
			tok, n := kruiseNumber(expr[i:])
			lit, err := celNumber(tok)
			if err != nil {
				return "", err
			}
			out.WriteString(lit)
			i += n
		case unicode.IsLetter(r) || r == '_':
			j := i
			for j < len(expr) && (unicode.IsLetter(rune(expr[j])) || unicode.IsDigit(rune(expr[j])) || expr[j] == '_') {
				j++
			}
			out.WriteString(strings.ToLower(expr[i:j]))
			i = j
		case strings.ContainsRune("+-*/", r):
			fmt.Fprintf(&out, " %c ", r)
			i++
		case r == ',':
			out.WriteString(", ")
			i++
		case r == '(' || r == ')':
			out.WriteRune(r)
			i++
		default:
			return "", fmt.Errorf("%q at offset %d is not part of OpenKruise's expressions (+ - * / ( ) , numbers, percentages, quantities, cpu, memory, max, min)", r, i)
		}
	}
	cel := strings.TrimSpace(out.String())
	if _, err := inject.CompileResourceExpr(name, cel); err != nil {
		return "", fmt.Errorf("translated to %q, which does not compile: %w", cel, err)
	}
	return cel, nil
}

// kruiseNumber is the number token at the start of s as OpenKruise's lexer reads it: digits,
// one dot, an exponent, then a percent sign or a quantity's unit letters; and its length.
func kruiseNumber(s string) (string, int) {
	i, dot, exp := 0, false, false
	for i < len(s) {
		r := rune(s[i])
		switch {
		case unicode.IsDigit(r):
		case r == '.' && !dot && !exp:
			dot = true
		case (r == 'e' || r == 'E') && !exp && i+1 < len(s) && (unicode.IsDigit(rune(s[i+1])) || s[i+1] == '+' || s[i+1] == '-'):
			exp = true
			if s[i+1] == '+' || s[i+1] == '-' {
				i++
			}
		case r == '%':
			return s[:i+1], i + 1
		case unicode.IsLetter(r):
			j := i
			for j < len(s) && unicode.IsLetter(rune(s[j])) {
				j++
			}
			return s[:j], j
		default:
			return s[:i], i
		}
		i++
	}
	return s, len(s)
}

// celNumber renders one OpenKruise number token as CEL: a double literal, or a quantity().
func celNumber(tok string) (string, error) {
	if pct, ok := strings.CutSuffix(tok, "%"); ok {
		v, err := strconv.ParseFloat(pct, 64)
		if err != nil {
			return "", fmt.Errorf("percentage %q: %w", tok, err)
		}
		return doubleLiteral(v / 100), nil
	}
	if v, err := strconv.ParseFloat(tok, 64); err == nil {
		return doubleLiteral(v), nil
	}
	if _, err := resource.ParseQuantity(tok); err != nil {
		return "", fmt.Errorf("quantity %q: %w", tok, err)
	}
	return "quantity('" + tok + "')", nil
}

// doubleLiteral is v as a CEL double literal (always with a dot or an exponent).
func doubleLiteral(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if math.IsInf(v, 0) || math.IsNaN(v) || strings.ContainsAny(s, ".e") {
		return s
	}
	return s + ".0"
}
