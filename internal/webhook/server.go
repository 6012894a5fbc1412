package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Timeouts bound how long a client may hold a connection of the webhook server.
type Timeouts struct {
	// ReadHeader is how long a request's headers may take to arrive.
	ReadHeader time.Duration
	// Read is how long a whole request, body included, may take to arrive.
	Read time.Duration
	// Write is how long the server may take to answer, from the end of the request's headers.
	Write time.Duration
	// Idle is how long a kept-alive connection may wait for its next request.
	Idle time.Duration
}

// DefaultTimeouts: the API server sends a review at once and waits for the answer at most the
// webhook's timeoutSeconds (5 here, 30 at most), so a request that takes longer to arrive or to
// be answered is answered to no one. Idle matches the keep-alive of the API server's
// transport, so its connections are reused between admissions.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: 90 * time.Second}

// DefaultDrain is how long a stopping server goes on answering: long enough for its endpoint
// to leave the Service (a few seconds) and for the API server to send one more review on each
// connection it keeps open to this replica, short of the manager Deployment's grace period (10s)
// less the webhook's timeout (5s).
const DefaultDrain = 5 * time.Second

// maxHeaderBytes is the largest request header accepted, as controller-runtime's server.
const maxHeaderBytes = 1 << 20

// Server is the manager's webhook server: controller-runtime's (registration, per-path
// metrics, TLS options and certificates) served by an http.Server with Timeouts.
// controller-runtime's own sets no read timeout, so a client that sends headers and then
// trickles, or never sends, its body holds a connection and its goroutine as long as it likes.
type Server struct {
	*webhook.DefaultServer

	opts     webhook.Options
	timeouts Timeouts
	drain    time.Duration

	// draining is set once the server is asked to stop: it is no longer ready, and each answer
	// closes its connection.
	draining atomic.Bool
	// stopped is closed once the server has shut down, stopErr then saying how; it never
	// closes if Start is never called (began).
	began   atomic.Bool
	stopped chan struct{}
	stopErr error

	mu      sync.Mutex
	started bool
	// watcher serves the certificate in CertDir, when TLSOpts give no GetCertificate.
	watcher *certwatcher.CertWatcher
}

var _ webhook.Server = &Server{}

// NewServer returns a webhook server serving with DefaultTimeouts; the options mean what they
// mean to controller-runtime's webhook.NewServer.
func NewServer(o webhook.Options) *Server {
	if o.WebhookMux == nil {
		o.WebhookMux = http.NewServeMux()
	}
	if o.Port == 0 {
		o.Port = webhook.DefaultPort
	}
	if o.CertDir == "" {
		o.CertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	if o.CertName == "" {
		o.CertName = "tls.crt"
	}
	if o.KeyName == "" {
		o.KeyName = "tls.key"
	}
	return &Server{DefaultServer: &webhook.DefaultServer{Options: o}, opts: o, timeouts: DefaultTimeouts, drain: DefaultDrain,
		stopped: make(chan struct{})}
}

// SetDrain sets how long the server goes on answering once asked to stop (DefaultDrain unless
// set); 0 shuts it down at once.
func (s *Server) SetDrain(d time.Duration) { s.drain = d }

// httpServer is the http.Server that serves handler.
func (s *Server) httpServer(ctx context.Context, handler http.Handler) *http.Server {
	return &http.Server{
		BaseContext:       func(net.Listener) context.Context { return ctx },
		Handler:           handler,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadHeaderTimeout: s.timeouts.ReadHeader,
		ReadTimeout:       s.timeouts.Read,
		WriteTimeout:      s.timeouts.Write,
		IdleTimeout:       s.timeouts.Idle,
	}
}

// Start serves the registered webhooks until ctx is done, then drains and returns at once, so
// that the manager goes on stopping (and hands the leader lease over) meanwhile; Wait returns
// once the server has shut down.
//
// Draining: for the drain period the server reports not ready, so that it leaves the Service
// (or the proxy) in front of it, and goes on answering every request, each answer saying
// "Connection: close" so that the client drops that connection once answered and sends its next
// review over a new one, to another replica. Then it shuts down, giving requests in flight a
// minute. Shutting down at once would close the API server's idle keep-alive connections under
// it: a review it sends on one as it closes fails with EOF, and the API server does not retry a
// POST that fails so, refusing the pod (failurePolicy Fail) or admitting it without its sidecars
// (Ignore).
func (s *Server) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook-server")
	s.began.Store(true)
	if s.opts.Port < 0 {
		log.Info("Webhook server is disabled")
		close(s.stopped)
		return nil
	}
	cfg, err := s.tlsConfig(ctx)
	if err != nil {
		close(s.stopped)
		return err
	}
	listener, err := tls.Listen("tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)), cfg)
	if err != nil {
		close(s.stopped)
		return fmt.Errorf("listening for webhook requests: %w", err)
	}
	log.Info("Serving webhook server", "host", s.opts.Host, "port", s.opts.Port)
	srv := s.httpServer(context.WithoutCancel(ctx), s.closingWhenDraining(s.opts.WebhookMux))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(listener) }()
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	select {
	case err := <-served:
		// Serve returns early only when accepting fails.
		s.stopErr = fmt.Errorf("serving webhook requests: %w", err)
		close(s.stopped)
		return s.stopErr
	case <-ctx.Done():
	}
	s.draining.Store(true)
	log.Info("Draining the webhook server: not ready, closing each connection once answered", "drain", s.drain)
	go func() {
		defer close(s.stopped)
		select {
		case err := <-served:
			s.stopErr = fmt.Errorf("serving webhook requests: %w", err)
			return
		case <-time.After(s.drain):
		}
		log.Info("Shutting down webhook server with timeout of 1 minute")
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := srv.Shutdown(stop); err != nil {
			s.stopErr = fmt.Errorf("shutting down the webhook server: %w", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) && s.stopErr == nil {
			s.stopErr = fmt.Errorf("serving webhook requests: %w", err)
		}
	}()
	return nil
}

// Wait returns once the server has shut down after draining, with what went wrong meanwhile.
// Call it once the manager has stopped: a server the manager never started returns at once.
func (s *Server) Wait() error {
	if !s.began.Load() {
		return nil
	}
	<-s.stopped
	return s.stopErr
}

// closingWhenDraining has each answer given while the server drains close its connection.
func (s *Server) closingWhenDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// tlsConfig is controller-runtime's: HTTP/2 unless TLSOpts say otherwise, the certificate
// from TLSOpts' GetCertificate or else watched in CertDir, client certificates verified when
// ClientCAName is set.
func (s *Server) tlsConfig(ctx context.Context) (*tls.Config, error) {
	cfg := &tls.Config{NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	for _, op := range s.opts.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		watcher, err := certwatcher.New(filepath.Join(s.opts.CertDir, s.opts.CertName), filepath.Join(s.opts.CertDir, s.opts.KeyName))
		if err != nil {
			return nil, fmt.Errorf("loading the webhook certificate: %w", err)
		}
		cfg.GetCertificate = watcher.GetCertificate
		s.mu.Lock()
		s.watcher = watcher
		s.mu.Unlock()
		go func() {
			if err := watcher.Start(ctx); err != nil {
				logf.FromContext(ctx).Error(err, "Watching the webhook certificate failed")
			}
		}()
	}
	if s.opts.ClientCAName != "" {
		pem, err := os.ReadFile(filepath.Join(s.opts.CertDir, s.opts.ClientCAName))
		if err != nil {
			return nil, fmt.Errorf("reading the webhook's client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the webhook's client CA %s holds no PEM certificate", s.opts.ClientCAName)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// StartedChecker is healthy once the server serves and accepts a TLS connection, presenting a
// certificate that has not expired and, when the server watches CertDir, the one the files there
// hold now. A replica whose certificate was renewed on disk but not yet read (the watcher reads
// on a file event or every 10 seconds) reads it at once here rather than report ready while
// presenting the old one. A server asked to stop is not ready: it drains.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if s.opts.Port < 0 {
			return nil
		}
		s.mu.Lock()
		started, watcher := s.started, s.watcher
		s.mu.Unlock()
		if !started {
			return errors.New("webhook server has not been started yet")
		}
		if s.draining.Load() {
			return errors.New("webhook server is shutting down: draining its connections")
		}
		served, err := s.servedCertificate()
		if err != nil {
			return err
		}
		if watcher != nil {
			onDisk, err := s.certificateOnDisk()
			if err != nil {
				return err
			}
			if !served.Equal(onDisk) {
				if err := watcher.ReadCertificate(); err != nil {
					return fmt.Errorf("webhook server presents a certificate other than %s, and reading that file failed: %w",
						s.certPath(), err)
				}
				if served, err = s.servedCertificate(); err != nil {
					return err
				}
				if !served.Equal(onDisk) {
					return fmt.Errorf("webhook server presents certificate %s, not %s's %s", served.SerialNumber, s.certPath(), onDisk.SerialNumber)
				}
			}
		}
		if time.Now().After(served.NotAfter) {
			return fmt.Errorf("webhook server presents a certificate that expired at %s", served.NotAfter.UTC().Format(time.RFC3339))
		}
		return nil
	}
}

// servedCertificate connects to the server and returns the leaf certificate it presents.
func (s *Server) servedCertificate() (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	// The certificate is read, not verified: a health check of our own listener.
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)),
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a health check of our own listener
	if err != nil {
		return nil, fmt.Errorf("webhook server is not reachable: %w", err)
	}
	peers := conn.ConnectionState().PeerCertificates
	if err := conn.Close(); err != nil {
		return nil, fmt.Errorf("webhook server is not reachable: closing connection: %w", err)
	}
	if len(peers) == 0 {
		return nil, errors.New("webhook server presents no certificate")
	}
	return peers[0], nil
}

func (s *Server) certPath() string { return filepath.Join(s.opts.CertDir, s.opts.CertName) }

// certificateOnDisk is the first certificate in CertDir's certificate file.
func (s *Server) certificateOnDisk() (*x509.Certificate, error) {
	data, err := os.ReadFile(s.certPath())
	if err != nil {
		return nil, fmt.Errorf("reading the webhook certificate: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s does not begin with a PEM certificate", s.certPath())
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", s.certPath(), err)
	}
	return cert, nil
}

// WebhookMux returns the mux the webhooks are registered on.
func (s *Server) WebhookMux() *http.ServeMux { return s.opts.WebhookMux }
