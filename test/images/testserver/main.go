// Command testserver is every process the real-node end-to-end tests run in a container: an app
// or a sidecar that serves its readiness and version on 127.0.0.1 (pods there use the host's
// network, so each container gets its own port), a variant that is slow to exit or never ready,
// and the pod sandbox's pause process. hack/devtool's registry packs it into the test images; what
// a container does comes from the image's environment, which the pod's env may override:
//
//	VERSION      reported on /version (each image tag bakes in its own)
//	PORT         the 127.0.0.1 port to serve on; any free one when empty or 0 (pods on one node
//	             share its network, so replicas of one template cannot share a fixed port)
//	NEVER_READY  "true": /readyz always answers 503
//	EXIT_DELAY   how long to keep serving after SIGTERM before exiting (a Go duration)
//
// The server writes its address to /tmp/testserver.addr; `testserver check` asks that address
// for /readyz (an exec readiness probe, whatever port was picked). With the single argument
// "pause" it only sleeps and reaps children, as a sandbox's pause does.
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

// addrFile is where the server writes the address it listens on, for `testserver check`.
const addrFile = "/tmp/testserver.addr"

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "pause":
		pause()
	case len(os.Args) > 1 && os.Args[1] == "check":
		err = check()
	default:
		err = serve()
	}
	if err != nil {
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

// check succeeds when the server of this container answers /readyz with 200.
func check() error {
	addr, err := os.ReadFile(addrFile)
	if err != nil {
		return fmt.Errorf("not serving yet: %w", err)
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + string(addr) + "/readyz")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
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
		port = "0"
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
	if err := os.WriteFile(addrFile, []byte(ln.Addr().String()), 0o600); err != nil {
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
	log.Printf("version %s terminating; exiting in %s", version, exitDelay)
	time.Sleep(exitDelay)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
