package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"
)

// Modes of MVQ_AUTH.
const (
	ModeTokens = "tokens"
	ModeJWT    = "jwt"
	ModeNone   = "none"
)

// DefaultReloadInterval is how often the tokens file and a JWKS file are
// checked for changes; a JWKS URL is fetched again every JWKSRefresh.
const (
	DefaultReloadInterval = 2 * time.Second
	JWKSRefresh           = 5 * time.Minute
)

// Config selects and configures the authenticator.
type Config struct {
	Mode       string // MVQ_AUTH: tokens, jwt or none; required by the API
	TokensFile string // MVQ_AUTH_TOKENS_FILE (tokens)
	JWTSecret  string // MVQ_AUTH_JWT_SECRET (jwt, HS256)
	JWKS       string // MVQ_AUTH_JWKS (jwt, RS256/ES256): a file path, an https URL, or an http URL on a loopback host
	// Audience (MVQ_AUTH_JWT_AUDIENCE) and Issuer (MVQ_AUTH_JWT_ISSUER), jwt only:
	// when set, a token's aud must include Audience and its iss must be
	// Issuer; a token without the claim is refused.
	Audience, Issuer string
	// AllowUnauthenticated (MVQ_ALLOW_UNAUTHENTICATED) lets mode none
	// listen on a non-loopback address.
	AllowUnauthenticated bool
	// ReloadInterval is how often files are checked for changes
	// (default DefaultReloadInterval).
	ReloadInterval time.Duration
}

// Check validates the configuration for an API listening on listen: a
// mode is required, each mode has what it needs, and mode none on a
// non-loopback address needs AllowUnauthenticated. It reads no file.
func (c Config) Check(listen string) error {
	switch c.Mode {
	case "":
		return errors.New("MVQ_AUTH is required: tokens, jwt, or none (none only on a loopback address unless MVQ_ALLOW_UNAUTHENTICATED=true)")
	case ModeNone:
		if !Loopback(listen) && !c.AllowUnauthenticated {
			return fmt.Errorf("MVQ_AUTH=none on the non-loopback address %s: anyone who reaches it can do anything; set MVQ_ALLOW_UNAUTHENTICATED=true to allow it", listen)
		}
	case ModeTokens:
		if c.TokensFile == "" {
			return errors.New("MVQ_AUTH=tokens needs MVQ_AUTH_TOKENS_FILE")
		}
		if c.JWTSecret != "" || c.JWKS != "" {
			return errors.New("MVQ_AUTH=tokens: MVQ_AUTH_JWT_SECRET and MVQ_AUTH_JWKS are for MVQ_AUTH=jwt")
		}
	case ModeJWT:
		if c.JWTSecret == "" && c.JWKS == "" {
			return errors.New("MVQ_AUTH=jwt needs MVQ_AUTH_JWT_SECRET (HS256) or MVQ_AUTH_JWKS (RS256/ES256), or both")
		}
		if c.JWTSecret != "" && len(c.JWTSecret) < minSecret {
			return fmt.Errorf("MVQ_AUTH_JWT_SECRET: at least %d bytes for HS256", minSecret)
		}
		if c.TokensFile != "" {
			return errors.New("MVQ_AUTH=jwt: MVQ_AUTH_TOKENS_FILE is for MVQ_AUTH=tokens")
		}
		if err := checkJWKSURL(c.JWKS); err != nil {
			return err
		}
	default:
		return fmt.Errorf("MVQ_AUTH=%q: want tokens, jwt or none", c.Mode)
	}
	if c.Mode != ModeJWT && (c.Audience != "" || c.Issuer != "") {
		return errors.New("MVQ_AUTH_JWT_AUDIENCE and MVQ_AUTH_JWT_ISSUER are for MVQ_AUTH=jwt")
	}
	return nil
}

// Loopback reports whether a listen address only accepts connections from
// this machine (127.0.0.0/8, ::1, localhost). An empty host listens on
// every interface.
func Loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Authenticator turns a presented credential into an identity.
type Authenticator interface {
	// Authenticate returns the credential's identity, or an *Error (401)
	// saying what is wrong; errors never contain the credential.
	Authenticate(ctx context.Context, credential string) (*Identity, error)
	// Close stops reloading.
	Close()
}

// Error is an authentication failure: missing, malformed, invalid or
// expired credentials. Its message is safe to show: it never holds the
// credential.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

func unauthenticated(format string, args ...any) error {
	return &Error{Reason: fmt.Sprintf(format, args...)}
}

// New returns the authenticator cfg selects; nil for mode none. The tokens
// file or JWKS must load now; later changes are picked up until Close.
func New(ctx context.Context, cfg Config) (Authenticator, error) {
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = DefaultReloadInterval
	}
	switch cfg.Mode {
	case ModeNone:
		return nil, nil
	case ModeTokens:
		t, err := openTokens(cfg.TokensFile, cfg.ReloadInterval)
		if err != nil {
			return nil, err
		}
		return t, nil
	case ModeJWT:
		j, err := openJWT(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return j, nil
	}
	return nil, fmt.Errorf("MVQ_AUTH=%q: want tokens, jwt or none", cfg.Mode)
}

// logReloadError reports a file that changed but did not load; the
// previous contents stay in force. err never holds secrets (see the
// loaders).
func logReloadError(what, path string, err error) {
	slog.Error("auth: reload failed; keeping the previous "+what, "path", path, "err", err)
}
