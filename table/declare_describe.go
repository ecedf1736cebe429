package table

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/mvq-dev/mvq/errs"
)

// DeclaredProperties answers the properties a declared table (one with no
// version yet) was declared with; ok is false when id is not declared.
func (c *Catalog) DeclaredProperties(ctx context.Context, id []string) (props map[string]string, ok bool, err error) {
	if ok, err := c.Declared(ctx, id); err != nil || !ok {
		return nil, false, err
	}
	b, err := c.wh.Read(ctx, c.handle(id).key+declaredMarker)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil // its first write just created it
	}
	if err != nil {
		return nil, false, err
	}
	var doc declaredDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, false, &errs.Error{Code: errs.CodeInvalidTableState, Message: "declared table " + JoinID(id) + ": marker unreadable", Err: err}
	}
	return doc.Properties, true, nil
}
