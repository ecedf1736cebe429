package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// Leeway is the clock skew allowed when checking exp and nbf.
const Leeway = 30 * time.Second

// maxJWKS caps a JWKS document.
const maxJWKS = 1 << 20

// claims are the JWT claims mvq reads: sub is the principal, mvq_grants
// its grants, mvq_rate_limit its requests per second (optional).
type claims struct {
	jwt.RegisteredClaims
	Grants    []Grant  `json:"mvq_grants"`
	RateLimit *float64 `json:"mvq_rate_limit"`
}

// jwtAuth verifies JWTs: HS256 with a shared secret, RS256 and ES256 with
// the public keys of a JWKS (a file, reloaded when it changes, or a URL,
// fetched again every JWKSRefresh and when a token names an unknown kid).
type jwtAuth struct {
	secret []byte
	parser *jwt.Parser
	keys   atomic.Pointer[keySet]

	w *watcher // JWKS file
	// JWKS URL
	url      string
	client   *http.Client
	fetchMu  sync.Mutex
	lastTry  time.Time
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

type keySet struct {
	byKid map[string]any // kid -> *rsa.PublicKey or *ecdsa.PublicKey
	all   []any
}

func openJWT(ctx context.Context, cfg Config) (*jwtAuth, error) {
	a := &jwtAuth{}
	var methods []string
	if cfg.JWTSecret != "" {
		if len(cfg.JWTSecret) < minSecret {
			return nil, fmt.Errorf("MVQ_AUTH_JWT_SECRET: at least %d bytes for HS256", minSecret)
		}
		a.secret = []byte(cfg.JWTSecret)
		methods = append(methods, "HS256")
	}
	if cfg.JWKS != "" {
		methods = append(methods, "RS256", "ES256")
		if strings.HasPrefix(cfg.JWKS, "https://") || strings.HasPrefix(cfg.JWKS, "http://") {
			a.url = cfg.JWKS
			a.client = &http.Client{Timeout: 10 * time.Second}
			if err := a.fetch(ctx); err != nil {
				return nil, err
			}
			a.stop, a.done = make(chan struct{}), make(chan struct{})
			go a.refreshLoop()
		} else {
			load := func(data []byte) error {
				ks, err := parseJWKS(data)
				if err != nil {
					return fmt.Errorf("JWKS file %s: %w", cfg.JWKS, err)
				}
				a.keys.Store(ks)
				return nil
			}
			w, err := watchFile(cfg.JWKS, cfg.ReloadInterval, load, func(err error) { logReloadError("JWKS", cfg.JWKS, err) })
			if err != nil {
				return nil, err
			}
			a.w = w
		}
	}
	if len(methods) == 0 {
		return nil, errors.New("MVQ_AUTH=jwt needs MVQ_AUTH_JWT_SECRET (HS256) or MVQ_AUTH_JWKS (RS256/ES256)")
	}
	a.parser = jwt.NewParser(jwt.WithValidMethods(methods), jwt.WithExpirationRequired(), jwt.WithLeeway(Leeway))
	return a, nil
}

// parseJWKS reads the public signing keys of a JWKS: RSA keys (of at least
// 2048 bits) and P-256 EC keys; keys marked for encryption are skipped.
func parseJWKS(data []byte) (*keySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS: %v", err)
	}
	ks := &keySet{byKid: map[string]any{}}
	for i, k := range set.Keys {
		if k.Use == "enc" {
			continue
		}
		pub := k.Public()
		switch key := pub.Key.(type) {
		case *rsa.PublicKey:
			if key.N.BitLen() < 2048 {
				return nil, fmt.Errorf("keys[%d]: RSA key of %d bits; want at least 2048", i, key.N.BitLen())
			}
		case *ecdsa.PublicKey:
			if key.Curve != elliptic.P256() {
				return nil, fmt.Errorf("keys[%d]: EC key on %s; ES256 needs P-256", i, key.Curve.Params().Name)
			}
		default:
			return nil, fmt.Errorf("keys[%d]: key type %T; want RSA or EC P-256", i, pub.Key)
		}
		if k.KeyID != "" {
			if _, dup := ks.byKid[k.KeyID]; dup {
				return nil, fmt.Errorf("keys[%d]: kid %q appears twice", i, k.KeyID)
			}
			ks.byKid[k.KeyID] = pub.Key
		}
		ks.all = append(ks.all, pub.Key)
	}
	if len(ks.all) == 0 {
		return nil, errors.New("no RSA or EC signing keys")
	}
	return ks, nil
}

// fetch loads the JWKS URL.
func (a *jwtAuth) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", a.url, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", a.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("JWKS %s: HTTP %d", a.url, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKS+1))
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", a.url, err)
	}
	if len(data) > maxJWKS {
		return fmt.Errorf("JWKS %s: larger than %d bytes", a.url, maxJWKS)
	}
	ks, err := parseJWKS(data)
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", a.url, err)
	}
	a.keys.Store(ks)
	return nil
}

func (a *jwtAuth) refreshLoop() {
	defer close(a.done)
	t := time.NewTicker(JWKSRefresh)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		if err := a.fetch(context.Background()); err != nil {
			logReloadError("JWKS", a.url, err)
		}
	}
}

// refetchOnce fetches the JWKS URL again for a kid it did not know, at most
// every 30 s (a stream of made-up kids cannot turn into a stream of
// fetches).
func (a *jwtAuth) refetchOnce(ctx context.Context) {
	if a.url == "" {
		return
	}
	a.fetchMu.Lock()
	defer a.fetchMu.Unlock()
	if time.Since(a.lastTry) < 30*time.Second {
		return
	}
	a.lastTry = time.Now()
	if err := a.fetch(ctx); err != nil {
		logReloadError("JWKS", a.url, err)
	}
}

func (a *jwtAuth) key(ctx context.Context, t *jwt.Token) (any, error) {
	if t.Method.Alg() == "HS256" {
		if a.secret == nil {
			return nil, errors.New("HS256 is not configured")
		}
		return a.secret, nil
	}
	kid, _ := t.Header["kid"].(string)
	pick := func(ks *keySet) any {
		if ks == nil {
			return nil
		}
		if kid != "" {
			return ks.byKid[kid]
		}
		if len(ks.all) == 1 {
			return ks.all[0]
		}
		return nil
	}
	k := pick(a.keys.Load())
	if k == nil && kid != "" {
		a.refetchOnce(ctx)
		k = pick(a.keys.Load())
	}
	if k == nil {
		return nil, errors.New("no key for the token's kid")
	}
	return k, nil
}

// Authenticate verifies the signature, exp (required) and nbf, and reads
// sub and mvq_grants.
func (a *jwtAuth) Authenticate(ctx context.Context, credential string) (*Identity, error) {
	var c claims
	_, err := a.parser.ParseWithClaims(credential, &c, func(t *jwt.Token) (any, error) { return a.key(ctx, t) })
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, unauthenticated("token expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return nil, unauthenticated("token not valid yet (nbf)")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return nil, unauthenticated("token has no exp claim")
	case errors.Is(err, jwt.ErrTokenMalformed):
		return nil, unauthenticated("malformed token")
	default:
		// Signature, algorithm, key: say no more than "invalid".
		return nil, unauthenticated("invalid token")
	}
	if strings.TrimSpace(c.Subject) == "" {
		return nil, unauthenticated("token has no sub claim")
	}
	if err := checkGrants(c.Grants, "mvq_grants"); err != nil {
		return nil, unauthenticated("token claim %v", err)
	}
	id := &Identity{Principal: c.Subject, Grants: c.Grants}
	if c.RateLimit != nil {
		r := *c.RateLimit
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return nil, unauthenticated("token claim mvq_rate_limit: want requests per second >= 0")
		}
		id.RateLimit = r
	}
	return id, nil
}

func (a *jwtAuth) Close() {
	if a.w != nil {
		a.w.close()
	}
	if a.stop != nil {
		a.stopOnce.Do(func() { close(a.stop) })
		<-a.done
	}
}
