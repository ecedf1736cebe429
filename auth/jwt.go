package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
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
	secret   []byte
	parser   *jwt.Parser
	audience bool // MVQ_AUTH_JWT_AUDIENCE set
	keys     atomic.Pointer[keySet]

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
		if err := checkJWKSURL(cfg.JWKS); err != nil {
			return nil, err
		}
		if isURL(cfg.JWKS) {
			a.url = cfg.JWKS
			a.client = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= 5 {
					return errors.New("too many redirects")
				}
				return checkJWKSURL(req.URL.String())
			}}
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
	opts := []jwt.ParserOption{jwt.WithValidMethods(methods), jwt.WithExpirationRequired(), jwt.WithLeeway(Leeway)}
	if cfg.Audience != "" {
		a.audience = true
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	a.parser = jwt.NewParser(opts...)
	return a, nil
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// checkJWKSURL refuses a JWKS fetched over plain HTTP from anywhere but
// this machine: whoever can answer for the host on the path (DNS, a
// proxy, the network) could serve their own keys and mint any token. A
// loopback host (a local sidecar, a test server) is allowed: the request
// does not leave the machine. Anything not http(s):// is a file path.
func checkJWKSURL(s string) error {
	if !isURL(s) {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return errors.New("MVQ_AUTH_JWKS: not a valid URL")
	}
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("MVQ_AUTH_JWKS: http:// to %s: a JWKS is fetched over https, or plain http only from a loopback host", host)
}

// Header and claim errors of a token whose signature verified.
var (
	errCrit       = errors.New("crit")
	errClaimTypes = errors.New("claim types")
)

// checkRaw checks what the JWT library lets through: a crit header (RFC
// 7515 4.1.11: a token naming an extension the verifier does not
// implement must be refused, and mvq implements none) and exp, nbf or iat
// given as a string ("exp": "9999999999" parses as a number there). It
// runs on the decoded header and the raw payload of a token whose
// signature verified.
func checkRaw(t *jwt.Token) error {
	if _, ok := t.Header["crit"]; ok {
		return errCrit
	}
	parts := strings.Split(t.Raw, ".")
	if len(parts) != 3 {
		return errClaimTypes
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return errClaimTypes
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil {
		return errClaimTypes
	}
	for _, k := range []string{"exp", "nbf", "iat"} {
		v, ok := raw[k]
		if !ok {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var x any
		if d.Decode(&x) != nil {
			return fmt.Errorf("%w: %s", errClaimTypes, k)
		}
		if n, ok := x.(json.Number); !ok {
			return fmt.Errorf("%w: %s", errClaimTypes, k)
		} else if _, err := n.Float64(); err != nil {
			return fmt.Errorf("%w: %s", errClaimTypes, k)
		}
	}
	return nil
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

// Authenticate verifies the signature, exp (required) and nbf, aud and iss
// when configured, refuses a crit header and non-numeric exp, nbf or iat,
// and reads sub and mvq_grants.
func (a *jwtAuth) Authenticate(ctx context.Context, credential string) (*Identity, error) {
	var c claims
	tok, err := a.parser.ParseWithClaims(credential, &c, func(t *jwt.Token) (any, error) { return a.key(ctx, t) })
	if err == nil {
		err = checkRaw(tok)
	}
	switch {
	case err == nil:
	case errors.Is(err, errCrit):
		return nil, unauthenticated("token header crit: no critical extension is supported")
	case errors.Is(err, errClaimTypes):
		return nil, unauthenticated("token claim %s: want a number of seconds (NumericDate)", strings.TrimPrefix(err.Error(), errClaimTypes.Error()+": "))
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return nil, unauthenticated("token aud does not name this API (MVQ_AUTH_JWT_AUDIENCE)")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return nil, unauthenticated("token iss is not the configured issuer (MVQ_AUTH_JWT_ISSUER)")
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, unauthenticated("token expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return nil, unauthenticated("token not valid yet (nbf)")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		switch {
		case c.ExpiresAt == nil:
			return nil, unauthenticated("token has no exp claim")
		case len(c.Audience) == 0 && a.audience:
			return nil, unauthenticated("token has no aud claim (MVQ_AUTH_JWT_AUDIENCE is set)")
		default:
			return nil, unauthenticated("token has no iss claim (MVQ_AUTH_JWT_ISSUER is set)")
		}
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
