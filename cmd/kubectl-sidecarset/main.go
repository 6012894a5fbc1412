// Command kubectl-sidecarset is the kubectl plugin of sidecarset-operator: `kubectl sidecarset
// inject|explain|status|rollout plan`. See `kubectl sidecarset --help`.
package main

import (
	"context"
	"os"
	"os/signal"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/sidecarset/sidecarset-operator/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Run(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
