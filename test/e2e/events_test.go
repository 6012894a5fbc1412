//go:build e2e

package e2e

import (
	"fmt"
	"strings"

	eventsv1 "k8s.io/api/events/v1"

	"github.com/sidecarset/sidecarset-operator/internal/eventcatalog"
)

// uncataloguedEvents lists the events the operator wrote during the suite (reporting controller
// sidecarset-*) whose reason the event catalog does not hold, or whose type is not the
// catalog's: every event a team may alert on is documented, and a Warning only where the
// catalog says a person is needed. TestMain fails the suite when it finds any.
func uncataloguedEvents() ([]string, error) {
	var list eventsv1.EventList
	if err := k8s.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	var bad []string
	seen := map[string]bool{}
	for _, e := range list.Items {
		if !strings.HasPrefix(e.ReportingController, "sidecarset-") {
			continue
		}
		seen[e.Reason] = true
		if !eventcatalog.Known(e.Reason) || e.Type != eventcatalog.Type(e.Reason) {
			bad = append(bad, fmt.Sprintf("%s %s on %s %s/%s (catalog: known %v, type %s): %s", e.Type, e.Reason, e.Regarding.Kind,
				e.Regarding.Namespace, e.Regarding.Name, eventcatalog.Known(e.Reason), eventcatalog.Type(e.Reason), e.Note))
		}
	}
	if len(seen) == 0 {
		bad = append(bad, "the operator wrote no event during the suite: the check saw nothing")
	}
	return bad, nil
}
