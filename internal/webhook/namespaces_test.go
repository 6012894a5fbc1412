package webhook

import (
	"context"
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// namespaceReader answers Gets of namespaces from a map, or with err; it counts its Gets.
type namespaceReader struct {
	client.Reader
	labels map[string]map[string]string
	err    error
	gets   int
}

func (r *namespaceReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	if r.err != nil {
		return r.err
	}
	labels, ok := r.labels[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, key.Name)
	}
	obj.(*corev1.Namespace).Labels = labels
	return nil
}

// TestNamespaceLabelsFrom: the cache answers when it has the namespace; only a miss asks the
// API server; other errors are returned as they are.
func TestNamespaceLabelsFrom(t *testing.T) {
	shop := map[string]string{"team": "shop"}
	unavailable := apierrors.NewServiceUnavailable("the API server is shutting down")
	tests := []struct {
		name        string
		cached      *namespaceReader
		live        *namespaceReader
		want        map[string]string
		wantErr     func(error) bool
		wantLiveGet int
	}{
		{name: "in the cache", cached: &namespaceReader{labels: map[string]map[string]string{"web": shop}},
			live: &namespaceReader{}, want: shop},
		{name: "created a moment ago: not in the cache yet", cached: &namespaceReader{},
			live: &namespaceReader{labels: map[string]map[string]string{"web": shop}}, want: shop, wantLiveGet: 1},
		{name: "nowhere", cached: &namespaceReader{}, live: &namespaceReader{},
			wantErr: apierrors.IsNotFound, wantLiveGet: 1},
		{name: "the cache fails otherwise", cached: &namespaceReader{err: errors.New("cache not started")},
			live:    &namespaceReader{labels: map[string]map[string]string{"web": shop}},
			wantErr: func(err error) bool { return err != nil && err.Error() == "cache not started" }},
		{name: "the API server fails", cached: &namespaceReader{}, live: &namespaceReader{err: unavailable},
			wantErr: apierrors.IsServiceUnavailable, wantLiveGet: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NamespaceLabelsFrom(tt.cached, tt.live)(t.Context(), "web")
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Errorf("error = %v, want another", err)
				}
			} else if err != nil || !maps.Equal(got, tt.want) {
				t.Errorf("NamespaceLabelsFrom() = %v, %v; want %v", got, err, tt.want)
			}
			if tt.live.gets != tt.wantLiveGet {
				t.Errorf("the API server was asked %d times, want %d", tt.live.gets, tt.wantLiveGet)
			}
		})
	}
}
