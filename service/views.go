package service

import (
	"context"

	"github.com/mvq-dev/mvq/httpapi"
)

// openViews wires the view and job layer; until it exists the API serves
// tables only.
func openViews(ctx context.Context, cfg Config, core *Core) (httpapi.Views, func(), error) {
	return nil, func() {}, nil
}
