package cli

import (
	"fmt"
	"strings"
)

// The plugin's exit codes. What each means is said once, in exitCodes: the help text is built
// from it, and a test holds docs/kubectl-plugin.md to the same words.
const (
	// ExitOK: success; for explain, no pod it explains is refused by the webhook.
	ExitOK = 0
	// ExitRefused: the input is bad (unparsable, not Kubernetes objects, naming what does not
	// exist) or the webhook refuses a pod: inject prints nothing, explain prints every verdict.
	ExitRefused = 1
	// ExitUsage: wrong flags or arguments.
	ExitUsage = 2
	// ExitCluster: the cluster could not be reached or refused a read (SidecarSets, revisions,
	// a namespace, its LimitRanges, a pod, a node), or rollout refresh's write.
	ExitCluster = 3
	// ExitChanges: upgrade-check found something an upgrade to this version would change.
	ExitChanges = 4
)

// exitCodes says what each exit code means, in the words of the help text and of
// docs/kubectl-plugin.md.
var exitCodes = []struct {
	code  int
	means string
}{
	{ExitOK, "success"},
	{ExitRefused, "bad input (unparsable YAML or JSON, a document that is not a Kubernetes object, a file that is not SidecarSets, " +
		"a pod or SidecarSet that does not exist, an OpenKruise field convert has no equivalent for) or a pod the webhook refuses " +
		"(inject then prints nothing; explain prints every verdict, Refused for the SidecarSet the webhook names)"},
	{ExitUsage, "wrong flags or arguments"},
	{ExitCluster, "the cluster could not be reached or refused a read (or, for rollout refresh, the write)"},
	{ExitChanges, "upgrade-check: upgrading the operator to this version would change a SidecarSet or a pod (the report says which)"},
}

// exitCodesHelp is the root command's paragraph on exit codes, wrapped for a terminal.
func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	for _, c := range exitCodes {
		b.WriteString(wrap(fmt.Sprintf("  %d %s", c.code, c.means), 100, "    "))
	}
	return b.String()
}

// wrap breaks s into lines of at most width characters (a word longer than that keeps its own
// line), the lines after the first starting with indent; every line ends with a newline.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := ""
	for i, word := range strings.Fields(s) {
		switch {
		case i == 0:
			line = s[:strings.Index(s, word)] + word // keep the leading indentation
		case len(line)+1+len(word) > width:
			b.WriteString(line + "\n")
			line = indent + word
		default:
			line += " " + word
		}
	}
	b.WriteString(line + "\n")
	return b.String()
}
