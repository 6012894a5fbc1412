package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// TestReadBody: the body is read whole, however it arrives; a short one is an error.
func TestReadBody(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*firstRead/16+5) // grows twice
	boom := errors.New("connection reset")
	tests := []struct {
		name    string
		r       io.Reader
		length  int
		want    []byte
		wantErr error
	}{
		{name: "empty", r: strings.NewReader(""), length: 0, want: []byte{}},
		{name: "small", r: strings.NewReader(`{"kind":"AdmissionReview"}`), length: 26, want: []byte(`{"kind":"AdmissionReview"}`)},
		{name: "byte by byte", r: iotest.OneByteReader(bytes.NewReader(big)), length: len(big), want: big},
		{name: "larger than the first read", r: bytes.NewReader(big), length: len(big), want: big},
		{name: "EOF with the last bytes", r: iotest.DataErrReader(bytes.NewReader(big)), length: len(big), want: big},
		{name: "shorter than declared", r: strings.NewReader("{}"), length: 3, wantErr: io.ErrUnexpectedEOF},
		{name: "much shorter than declared", r: bytes.NewReader(big), length: maxReviewSize, wantErr: io.ErrUnexpectedEOF},
		{name: "read error", r: io.MultiReader(strings.NewReader("{"), iotest.ErrReader(boom)), length: 2, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readBody(tt.r, tt.length)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("readBody() error = %v, want %v", err, tt.wantErr)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("readBody() = %d bytes, want %d", len(got), len(tt.want))
			}
			if cap(got) > tt.length {
				t.Errorf("readBody() buffer holds %d bytes, more than the %d declared", cap(got), tt.length)
			}
		})
	}
}

// offered records the largest buffer it was asked to fill, having sent sent bytes so far.
type offered struct {
	r             io.Reader
	sent, largest int
}

func (o *offered) Read(p []byte) (int, error) {
	o.largest = max(o.largest, len(p))
	n, err := o.r.Read(p)
	o.sent += n
	return n, err
}

// TestReadBodyGrowsAsBytesArrive: the buffer never outgrows what the client sent by more than
// twice (or the first read): what a client declares costs nothing until it sends it.
func TestReadBodyGrowsAsBytesArrive(t *testing.T) {
	for _, sent := range []int{0, 100, firstRead, 3 * firstRead, 1 << 20} {
		t.Run(fmt.Sprint(sent), func(t *testing.T) {
			o := &offered{r: bytes.NewReader(make([]byte, sent))}
			if _, err := readBody(o, maxReviewSize); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("readBody() error = %v, want io.ErrUnexpectedEOF", err)
			}
			if limit := max(firstRead, 2*sent); o.largest > limit {
				t.Errorf("after %d bytes of a body declaring %d, readBody offered a buffer of %d bytes, want at most %d",
					sent, maxReviewSize, o.largest, limit)
			}
		})
	}
}

// TestReviewDoesNotAllocateTheDeclaredLength: serving a request that declares the largest body
// and sends a few bytes allocates a small part of what it declared (measured on the heap).
func TestReviewDoesNotAllocateTheDeclaredLength(t *testing.T) {
	h := NewReview(&recorder{})
	serve := func() {
		r := httptest.NewRequest(http.MethodPost, PodInjectorPath, strings.NewReader(`{"kind":"AdmissionReview",`))
		r.Header.Set("Content-Type", "application/json")
		r.ContentLength = maxReviewSize
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || allowed(t, w) {
			t.Fatalf("a truncated body was answered %d %s, want a refusal", w.Code, w.Body)
		}
	}
	serve() // first-use allocations (the decoder's caches) are not the body's
	const n = 8
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		serve()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > maxReviewSize/16 {
		t.Errorf("a request declaring %d bytes and sending 26 allocated %d bytes, want at most %d", maxReviewSize, per, maxReviewSize/16)
	}
}

// TestServerTimeouts: the server's http.Server carries every timeout.
func TestServerTimeouts(t *testing.T) {
	srv := NewServer(webhook.Options{}).httpServer(t.Context(), http.NewServeMux())
	got := Timeouts{ReadHeader: srv.ReadHeaderTimeout, Read: srv.ReadTimeout, Write: srv.WriteTimeout, Idle: srv.IdleTimeout}
	if got != DefaultTimeouts {
		t.Errorf("http.Server timeouts = %+v, want %+v", got, DefaultTimeouts)
	}
	for name, d := range map[string]time.Duration{"ReadHeader": got.ReadHeader, "Read": got.Read, "Write": got.Write, "Idle": got.Idle} {
		if d <= 0 {
			t.Errorf("%s timeout is %v: a client could hold a connection forever", name, d)
		}
	}
	if srv.MaxHeaderBytes != maxHeaderBytes {
		t.Errorf("MaxHeaderBytes = %d, want %d", srv.MaxHeaderBytes, maxHeaderBytes)
	}
}

// startServer starts a Server with the given timeouts on a free local port, serving an
// allow-everything pod injector, and returns its address.
func startServer(t *testing.T, timeouts Timeouts) string {
	t.Helper()
	_, addr, _ := startDrainingServer(t, timeouts, 0)
	return addr
}

// startDrainingServer is startServer draining for drain, returning the server and how to stop
// it (as the manager does: Start returns, then Wait).
func startDrainingServer(t *testing.T, timeouts Timeouts, drain time.Duration) (*Server, string, context.CancelFunc) {
	t.Helper()
	// httptest's TLS server holds a self-signed certificate for 127.0.0.1; borrow it.
	hs := httptest.NewUnstartedServer(nil)
	hs.StartTLS()
	cert := hs.TLS.Certificates[0]
	hs.Close()
	port := freePort(t)
	s := NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
		c.NextProtos = []string{"http/1.1"}
	}}})
	s.timeouts = timeouts
	s.SetDrain(drain)
	s.Register(PodInjectorPath, NewReview(&recorder{}))
	stop := runServer(t, s)
	for deadline := time.Now().Add(10 * time.Second); s.StartedChecker()(nil) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not start: %v", s.StartedChecker()(nil))
		}
	}
	return s, net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), stop
}

// freePort is a local port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// runServer starts s until the test ends or it calls the stop returned, which returns once
// Start has; the test fails if Start or Wait returns an error.
func runServer(t *testing.T, s *Server) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start() = %v", err)
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if err := s.Wait(); err != nil {
			t.Errorf("Wait() = %v", err)
		}
	})
	return stop
}

// closedWithin reports whether the server closes conn within d, reading (and discarding)
// whatever it answers first.
func closedWithin(t *testing.T, conn net.Conn, d time.Duration) bool {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, conn)
	var netErr net.Error
	return !errors.As(err, &netErr) || !netErr.Timeout()
}

// TestServerDropsSlowClients: over a real TLS connection, a client that stops sending in the
// middle of its headers or of its body is disconnected after the server's timeouts, while a
// request sent at once is answered.
func TestServerDropsSlowClients(t *testing.T) {
	addr := startServer(t, Timeouts{ReadHeader: 200 * time.Millisecond, Read: 400 * time.Millisecond, Write: time.Second, Idle: time.Second})
	dial := func() net.Conn {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's own server
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	send := func(conn net.Conn, s string) {
		if _, err := io.WriteString(conn, s); err != nil {
			t.Fatal(err)
		}
	}
	body := string(reviewBody(t))
	headers := func(length int) string {
		return "POST " + PodInjectorPath + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" +
			"Content-Length: " + fmt.Sprint(length) + "\r\n\r\n"
	}

	t.Run("a request sent at once is answered", func(t *testing.T) {
		conn := dial()
		send(conn, headers(len(body))+body)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d, want 200", resp.StatusCode)
		}
	})
	t.Run("headers never finished", func(t *testing.T) {
		conn := dial()
		send(conn, "POST "+PodInjectorPath+" HTTP/1.1\r\nHost: "+addr+"\r\n")
		if !closedWithin(t, conn, 10*time.Second) {
			t.Error("a client that never finished its headers still holds its connection after 10s")
		}
	})
	t.Run("body never sent", func(t *testing.T) {
		conn := dial()
		send(conn, headers(maxReviewSize)+`{"kind":`)
		if !closedWithin(t, conn, 10*time.Second) {
			t.Error("a client that declared a body and never sent it still holds its connection after 10s")
		}
	})
}

// TestServerDrainsBeforeShuttingDown: asked to stop, the server reports not ready and goes on
// answering for its drain period, each answer closing its connection, so that a client holding
// keep-alive connections (the API server) loses none under a review it is sending; then it
// shuts down. Shutting down at once fails such reviews with EOF or a refused connection.
func TestServerDrainsBeforeShuttingDown(t *testing.T) {
	const drain = 2 * time.Second
	s, addr, stop := startDrainingServer(t, DefaultTimeouts, drain)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test's own server
		MaxIdleConnsPerHost: 8,
	}}
	t.Cleanup(hc.CloseIdleConnections)
	body := reviewBody(t)
	// post sends one review as the API server does (a POST, which no client retries) and
	// reports whether the answer closed its connection.
	post := func() (closed bool, err error) {
		resp, err := hc.Post("https://"+addr+PodInjectorPath, "application/json", bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		defer func() { _ = resp.Body.Close() }()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return false, err
		}
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("status %d", resp.StatusCode)
		}
		return resp.Close, nil
	}

	// Four clients keep connections busy, each sending a review every 5ms, until the drain is
	// half over: those sent after Start returned must all be answered and close their
	// connections.
	var stopped, quit atomic.Bool
	var mu sync.Mutex
	var failed []error
	answered, keptOpen := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !quit.Load() {
				after := stopped.Load()
				closed, err := post()
				mu.Lock()
				switch {
				case err != nil:
					failed = append(failed, err)
				case after:
					answered++
					if !closed {
						keptOpen++
					}
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // connections opened and kept alive
	stop()
	stopped.Store(true)
	if err := s.StartedChecker()(nil); err == nil {
		t.Error("the server reports ready while it drains")
	}
	time.Sleep(drain / 2)
	quit.Store(true)
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d reviews failed while the server drained, the first: %v", len(failed), failed[0])
	}
	if answered == 0 || keptOpen > 0 {
		t.Errorf("%d reviews answered while draining, %d of them keeping their connection open; want some, none kept open", answered, keptOpen)
	}
	t.Logf("%d reviews answered while draining, each closing its connection", answered)
	if err := s.Wait(); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if _, err := post(); err == nil {
		t.Error("the server still answers after Wait returned")
	}
}
