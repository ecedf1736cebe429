package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/goccy/go-yaml"
)

// TokenEntry is one token of a tokens file.
type TokenEntry struct {
	// TokenSHA256 is the hex SHA-256 of the token; Token is the token
	// itself (for development). Exactly one is set.
	TokenSHA256 string  `json:"token_sha256"`
	Token       string  `json:"token"`
	Principal   string  `json:"principal"`
	Grants      []Grant `json:"grants"`
	// RateLimit is requests per second for the principal; 0 or absent is
	// unlimited.
	RateLimit float64 `json:"rate_limit"`
}

// TokensFile is the contents of MVQ_AUTH_TOKENS_FILE (YAML or JSON).
type TokensFile struct {
	Tokens []TokenEntry `json:"tokens"`
}

type tokenSet struct {
	sums [][sha256.Size]byte
	ids  []*Identity
}

// ParseTokens parses and validates a tokens file: YAML or JSON, no unknown
// fields, no duplicate keys or tokens, each token with a principal and
// valid grants. Errors name the entry and field, never a token's value.
func ParseTokens(data []byte) (*TokensFile, error) {
	var generic any
	if err := yaml.UnmarshalWithOptions(data, &generic); err != nil {
		// The YAML library quotes the offending source line, which may
		// hold a token: report the position only.
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil {
			p := ye.GetToken().Position
			return nil, fmt.Errorf("not valid YAML or JSON near line %d, column %d", p.Line, p.Column)
		}
		return nil, errors.New("not valid YAML or JSON")
	}
	// Decode through encoding/json for strict field checking; its errors
	// name fields and types, never values.
	raw, err := json.Marshal(generic)
	if err != nil {
		return nil, errors.New("not a tokens document")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f TokensFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("want {tokens: [{token_sha256 or token, principal, grants, rate_limit}]}: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(f.Tokens) == 0 {
		return nil, errors.New("tokens: no tokens (every request would be refused)")
	}
	seen := map[[sha256.Size]byte]int{}
	for i := range f.Tokens {
		e := &f.Tokens[i]
		at := fmt.Sprintf("tokens[%d]", i)
		sum, err := e.sum()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", at, err)
		}
		if j, dup := seen[sum]; dup {
			return nil, fmt.Errorf("%s: the same token as tokens[%d]", at, j)
		}
		seen[sum] = i
		if strings.TrimSpace(e.Principal) == "" {
			return nil, fmt.Errorf("%s.principal: required", at)
		}
		if e.RateLimit < 0 || math.IsNaN(e.RateLimit) || math.IsInf(e.RateLimit, 0) {
			return nil, fmt.Errorf("%s.rate_limit: want requests per second >= 0 (0 is unlimited)", at)
		}
		if len(e.Grants) == 0 {
			return nil, fmt.Errorf("%s.grants: required (a token without grants can do nothing)", at)
		}
		if err := checkGrants(e.Grants, at+".grants"); err != nil {
			return nil, err
		}
	}
	return &f, nil
}

func (e *TokenEntry) sum() ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	switch {
	case e.Token != "" && e.TokenSHA256 != "":
		return sum, errors.New("set token_sha256 or token, not both")
	case e.Token != "":
		if len(e.Token) < minToken {
			return sum, fmt.Errorf("token: at least %d characters", minToken)
		}
		return sha256.Sum256([]byte(e.Token)), nil
	case e.TokenSHA256 != "":
		b, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(b) != sha256.Size {
			return sum, errors.New("token_sha256: want 64 hex digits (sha256sum of the token)")
		}
		copy(sum[:], b)
		return sum, nil
	}
	return sum, errors.New("token_sha256 or token: required")
}

// minToken is the shortest plain token accepted; minSecret the shortest
// HS256 secret.
const (
	minToken  = 16
	minSecret = 32
)

func (f *TokensFile) set() *tokenSet {
	s := &tokenSet{}
	for _, e := range f.Tokens {
		sum, _ := e.sum()
		s.sums = append(s.sums, sum)
		s.ids = append(s.ids, &Identity{Principal: e.Principal, Grants: e.Grants, RateLimit: e.RateLimit})
	}
	return s
}

// tokens authenticates opaque bearer tokens against a tokens file that is
// reloaded when it changes.
type tokens struct {
	path string
	set  atomic.Pointer[tokenSet]
	w    *watcher
}

func openTokens(path string, interval time.Duration) (*tokens, error) {
	t := &tokens{path: path}
	load := func(data []byte) error {
		f, err := ParseTokens(data)
		if err != nil {
			return fmt.Errorf("tokens file %s: %w", path, err)
		}
		t.set.Store(f.set())
		return nil
	}
	w, err := watchFile(path, interval, load, func(err error) { logReloadError("tokens", path, err) })
	if err != nil {
		return nil, err
	}
	t.w = w
	return t, nil
}

// Authenticate compares the credential's SHA-256 with every token's in
// constant time: neither the match nor its position shows in the timing.
func (t *tokens) Authenticate(_ context.Context, credential string) (*Identity, error) {
	sum := sha256.Sum256([]byte(credential))
	set := t.set.Load()
	found := -1
	for i := range set.sums {
		eq := subtle.ConstantTimeCompare(sum[:], set.sums[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil, unauthenticated("invalid credentials")
	}
	return set.ids[found], nil
}

func (t *tokens) Close() { t.w.close() }
