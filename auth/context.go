// Package auth authenticates API callers and checks their grants. A
// request's authenticated principal travels in its context.
package auth

import "context"

type principalKey struct{}

// WithPrincipal returns ctx carrying the authenticated principal's name.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// PrincipalFrom returns the principal a request authenticated as, or ""
// when authentication is off (MVQ_AUTH=none) or the request carried none.
func PrincipalFrom(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}
