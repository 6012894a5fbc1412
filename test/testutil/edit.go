package testutil

import (
	"context"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Edit applies edit to obj as the API server stores it now and writes the result with an
// Update. Most objects a test touches have another writer (the operator writes a SidecarSet's
// status, a kubelet a pod's, the Deployment controller a Deployment's), so a Get followed by an
// Update races it and fails with Conflict now and then; Edit reads again and re-applies edit on
// a conflict, and returns any other error (a refusal a test expects among them) as it is.
// obj, a typed object, need only carry its name and namespace; on return it holds what was
// last read or stored.
// `go run ./hack/devtool conflictcheck` (make lint) finds an Update written any other way.
func Edit[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c client.Client, obj PT, edit func(PT)) error {
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := reread(ctx, c, key, obj); err != nil {
			return err
		}
		edit(obj)
		return c.Update(ctx, obj)
	})
}

// EditStatus is Edit through the status subresource, for a test that writes status the way a
// kubelet or another controller would.
func EditStatus[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c client.Client, obj PT, edit func(PT)) error {
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := reread(ctx, c, key, obj); err != nil {
			return err
		}
		edit(obj)
		return c.Status().Update(ctx, obj)
	})
}

// reread reads the object named key into obj, zeroed first: decoding into an object an earlier
// attempt edited would keep map entries and fields the stored object no longer has.
func reread[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c client.Client, key client.ObjectKey, obj PT) error {
	var zero T
	*obj = zero
	return c.Get(ctx, key, obj)
}
