package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// backend is one operator replica: its webhook port and its health port.
type backend struct {
	name                    string
	webhookPort, healthPort int
}

// readBackends parses the backends file: one "NAME WEBHOOK_PORT HEALTH_PORT" line per replica;
// other lines are skipped. A missing file is no replica.
func readBackends(path string) []backend {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []backend
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		wp, err1 := strconv.Atoi(fields[1])
		hp, err2 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil {
			out = append(out, backend{fields[0], wp, hp})
		}
	}
	return out
}

// proxy forwards each TCP connection (TLS passes through untouched; the replicas hold the
// certificate) to the next replica in round-robin order, preferring replicas whose /readyz
// answers 200 and falling over to the next one when a connection is refused. The backends file
// is read again for every connection, so replicas come and go without a restart.
type proxy struct {
	backends string
	turn     atomic.Uint64
	mu       sync.Mutex
	ready    map[string]bool
	dial     func(port int) (net.Conn, error)
}

func newProxy(backends string) *proxy {
	return &proxy{backends: backends, ready: map[string]bool{}, dial: func(port int) (net.Conn, error) {
		return net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	}}
}

// order is the replicas to try for the next connection: ready ones first, each group
// starting at the next turn.
func (p *proxy) order() []backend {
	bs := readBackends(p.backends)
	if len(bs) == 0 {
		return nil
	}
	n := int(p.turn.Add(1)-1) % len(bs)
	bs = append(bs[n:], bs[:n]...)
	p.mu.Lock()
	defer p.mu.Unlock()
	var ready, rest []backend
	for _, b := range bs {
		if p.ready[b.name] {
			ready = append(ready, b)
		} else {
			rest = append(rest, b)
		}
	}
	return append(ready, rest...)
}

func (p *proxy) handle(client net.Conn) {
	defer func() { _ = client.Close() }()
	order := p.order()
	if len(order) == 0 {
		log.Print("no replica registered; closing the connection")
		return
	}
	var server net.Conn
	for _, b := range order {
		c, err := p.dial(b.webhookPort)
		if err == nil {
			server = c
			break
		}
		log.Printf("%s: connection to 127.0.0.1:%d failed; trying the next replica", b.name, b.webhookPort)
	}
	if server == nil {
		log.Print("no replica accepted a connection")
		return
	}
	defer func() { _ = server.Close() }()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // the other direction may still carry the answer
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	<-done
}

// probe checks every replica's /readyz each half second and logs changes.
func (p *proxy) probe(ctx context.Context) {
	hc := &http.Client{Timeout: time.Second}
	for ctx.Err() == nil {
		now := map[string]bool{}
		for _, b := range readBackends(p.backends) {
			resp, err := hc.Get("http://127.0.0.1:" + strconv.Itoa(b.healthPort) + "/readyz")
			ok := err == nil && resp.StatusCode == http.StatusOK
			if resp != nil {
				_ = resp.Body.Close()
			}
			now[b.name] = ok
		}
		p.mu.Lock()
		for name, ok := range now {
			if p.ready[name] != ok {
				log.Printf("%s %s", name, map[bool]string{true: "ready", false: "not ready"}[ok])
			}
		}
		p.ready = now
		p.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// serveProxy runs the proxy on 127.0.0.1:port until SIGTERM or SIGINT.
func serveProxy(port int, backends string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	p := newProxy(backends)
	go p.probe(ctx)
	go func() { <-ctx.Done(); _ = l.Close() }()
	log.Printf("listening on 127.0.0.1:%d, replicas from %s", port, backends)
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go p.handle(c)
	}
}
