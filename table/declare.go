package table

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"strings"

	"github.com/mvq-dev/mvq/errs"
)

// declaredMarker marks a table folder declared (table/declare) but not yet
// created: it has no version until a create or insert writes its data.
const declaredMarker = "_declared.json"

type declaredDoc struct {
	Properties map[string]string `json:"properties,omitempty"`
	// Transaction, when set, is the batch that declares the table: it is
	// declared only once that transaction succeeded (txn_ops.go).
	Transaction string `json:"transaction,omitempty"`
}

// DeclareTable declares table id without data: a second declare is a
// conflict, listings show it (include_declared), and the first create or
// insert writes its first version. It returns the folder's location.
func (c *Catalog) DeclareTable(ctx context.Context, id []string, props map[string]string) (string, error) {
	if len(id) == 0 {
		return "", errs.Errorf(errs.CodeInvalidInput, "a table identifier needs a name")
	}
	if err := c.requireNamespace(ctx, id[:len(id)-1]); err != nil {
		return "", err
	}
	t := c.handle(id)
	if ok, err := c.tableExists(ctx, id); err != nil {
		return "", err
	} else if ok {
		return "", errs.Errorf(errs.CodeTableAlreadyExists, "table %s already exists", JoinID(id))
	}
	b, _ := json.Marshal(declaredDoc{Properties: props})
	err := c.wh.PutIfNotExists(ctx, t.key+declaredMarker, b)
	if errors.Is(err, ErrExists) {
		// A batch that failed to declare it leaves nothing that counts.
		if ok, derr := c.declaredNow(ctx, t, true); derr != nil {
			return "", derr
		} else if !ok {
			err = c.wh.PutIfNotExists(ctx, t.key+declaredMarker, b)
		}
	}
	if errors.Is(err, ErrExists) {
		return "", errs.Errorf(errs.CodeTableAlreadyExists, "table %s is already declared", JoinID(id))
	}
	if err != nil {
		return "", err
	}
	return t.Location(), nil
}

// TableLocation is where table id's folder is (or would be).
func (c *Catalog) TableLocation(id []string) string { return c.handle(id).Location() }

// Declared reports whether id is declared and has no version yet.
func (c *Catalog) Declared(ctx context.Context, id []string) (bool, error) {
	if len(id) == 0 {
		return false, nil
	}
	if ok, err := c.tableExists(ctx, id); err != nil || ok {
		return false, err
	}
	return c.declaredNow(ctx, c.handle(id), false)
}

// forgetDeclared removes the declared marker once the table has data.
func (c *Catalog) forgetDeclared(ctx context.Context, id []string) {
	if err := c.wh.Delete(ctx, c.handle(id).key+declaredMarker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return
	}
}

// CreateDeclared gives a declared table its first version, from the first
// write to it (insert); a table not declared is not found.
func (c *Catalog) CreateDeclared(ctx context.Context, id []string, create func() (*Table, *Manifest, error)) (*Table, *Manifest, error) {
	ok, err := c.Declared(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, errs.Errorf(errs.CodeTableNotFound, "table %s not found", JoinID(id))
	}
	t, m, err := create()
	if err == nil {
		c.forgetDeclared(ctx, id)
	}
	return t, m, err
}

// ListAllTables lists every table (and view) of the catalog, in every
// namespace, as identifiers joined with delim, sorted; declared tables
// without data too when includeDeclared.
func (c *Catalog) ListAllTables(ctx context.Context, delim string, includeDeclared bool) ([]string, error) {
	if delim == "" {
		delim = DefaultDelimiter
	}
	var out []string
	var walk func(ns []string) error
	walk = func(ns []string) error {
		entries, err := c.wh.List(ctx, namespaceKey(ns))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.IsDir {
				continue
			}
			if name, ok := strings.CutSuffix(e.Name, tableSuffix); ok {
				child := append(append([]string{}, ns...), name)
				exists, err := c.tableExists(ctx, child)
				if err != nil {
					return err
				}
				if !exists && includeDeclared {
					if exists, err = c.declaredNow(ctx, c.handle(child), false); err != nil {
						return err
					}
				}
				if exists {
					out = append(out, strings.Join(child, delim))
				}
				continue
			}
			child := append(append([]string{}, ns...), e.Name)
			if ok, err := c.NamespaceExists(ctx, child); err != nil {
				return err
			} else if ok {
				if err := walk(child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(nil); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}
