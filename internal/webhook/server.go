package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
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

	mu      sync.Mutex
	started bool
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
	return &Server{DefaultServer: &webhook.DefaultServer{Options: o}, opts: o, timeouts: DefaultTimeouts}
}

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

// Start serves the registered webhooks until ctx is done, then shuts down, giving requests
// in flight a minute.
func (s *Server) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook-server")
	if s.opts.Port < 0 {
		log.Info("Webhook server is disabled")
		return nil
	}
	cfg, err := s.tlsConfig(ctx)
	if err != nil {
		return err
	}
	listener, err := tls.Listen("tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)), cfg)
	if err != nil {
		return fmt.Errorf("listening for webhook requests: %w", err)
	}
	log.Info("Serving webhook server", "host", s.opts.Host, "port", s.opts.Port)
	srv := s.httpServer(ctx, s.opts.WebhookMux)
	shutdown := make(chan error, 1)
	go func() {
		<-ctx.Done()
		log.Info("Shutting down webhook server with timeout of 1 minute")
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		shutdown <- srv.Shutdown(stop)
	}()
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving webhook requests: %w", err)
	}
	if err := <-shutdown; err != nil {
		return fmt.Errorf("shutting down the webhook server: %w", err)
	}
	return nil
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

// StartedChecker is healthy once the server serves and accepts a TLS connection.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if s.opts.Port < 0 {
			return nil
		}
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if !started {
			return errors.New("webhook server has not been started yet")
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		// Only reachability is checked, not who serves: the certificate is not verified.
		conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)),
			&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a health check of our own listener
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		if err := conn.Close(); err != nil {
			return fmt.Errorf("webhook server is not reachable: closing connection: %w", err)
		}
		return nil
	}
}

// WebhookMux returns the mux the webhooks are registered on.
func (s *Server) WebhookMux() *http.ServeMux { return s.opts.WebhookMux }
