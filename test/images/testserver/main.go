// Command testserver is every process the real-node end-to-end tests run in a container: an app
// or a sidecar that serves its readiness and version on 127.0.0.1 (pods there use the host's
// network, so each container gets its own port), a variant that is slow to exit or never ready,
// and the pod sandbox's pause process. hack/devtool's registry packs it into the test images; what
// a container does comes from the image's environment, which the pod's env may override:
//
//	VERSION      reported on /version (each image tag bakes in its own)
//	PORT         the 127.0.0.1 port to serve on (no server when empty)
//	NEVER_READY  "true": /readyz always answers 503
//	EXIT_DELAY   how long to keep serving after SIGTERM before exiting (a Go duration)
//
// With the single argument "pause" it only sleeps and reaps children, as a sandbox's pause does.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "pause" {
		pause()
		return
	}
	if err := serve(); err != nil {
		log.Fatal(err)
	}
}

// pause waits for a signal to stop, reaping any child that the sandbox's containers leave behind
// (it is PID 1 of the pod's PID namespace when the pod shares one).
func pause() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

func serve() error {
	version := os.Getenv("VERSION")
	neverReady := os.Getenv("NEVER_READY") == "true"
	var exitDelay time.Duration
	if d := os.Getenv("EXIT_DELAY"); d != "" {
		var err error
		if exitDelay, err = time.ParseDuration(d); err != nil {
			return fmt.Errorf("EXIT_DELAY=%q: %w", d, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	port := os.Getenv("PORT")
	if port == "" {
		<-ctx.Done()
		time.Sleep(exitDelay)
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, version) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if neverReady {
			http.Error(w, "never ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Printf("version %s serving on %s", version, ln.Addr())
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Printf("terminating; exiting in %s", exitDelay)
	time.Sleep(exitDelay)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
