package refresh

import (
	"context"
	"encoding/json"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// MaxViewDepth bounds a chain of views over views (the table at the
// bottom not counted); a deeper chain is refused at create.
const MaxViewDepth = 32

// checkChain refuses a view id over source when the chain of sources below
// source reaches id (a cycle: possible when a table a view reads was dropped
// and a view is created under its name over that view) or is deeper than
// MaxViewDepth. It follows definitions, so a source that is gone ends the
// chain. Errors: CodeInvalidInput naming source_query.
func (e *Engine) checkChain(ctx context.Context, id, source []string) error {
	path := []string{table.JoinID(id)}
	cur := source
	for depth := 0; ; depth++ {
		path = append(path, table.JoinID(cur))
		if table.JoinID(cur) == table.JoinID(id) {
			return invalid("source_query: views would form a cycle (%s)", joinArrow(path))
		}
		if depth >= MaxViewDepth {
			return invalid("source_query: a chain of more than %d views over views (%s...)", MaxViewDepth, joinArrow(path[:4]))
		}
		def, err := e.definition(ctx, cur)
		if err != nil || def == nil {
			return err
		}
		cur = def.Source
	}
}

// definition reads the definition of the latest version of table id: nil
// when id is a plain table or is gone.
func (e *Engine) definition(ctx context.Context, id []string) (*Definition, error) {
	t, err := e.cat.OpenTable(ctx, id)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := t.Load(ctx, 0)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	raw, ok := m.Properties[propView]
	if !ok {
		return nil, nil
	}
	var def Definition
	if err := json.Unmarshal(raw, &def); err != nil {
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: "view " + table.JoinID(id) + ": definition unreadable", Err: err}
	}
	return &def, nil
}

// sourceGone is the error of a refresh of a view whose source table is
// gone: CodeInvalidTableState (409), naming both.
func sourceGone(view, source []string) error {
	return errs.Errorf(errs.CodeInvalidTableState, "view %s cannot refresh: its source table %s is gone (dropped); drop the view, or create the source again", table.JoinID(view), table.JoinID(source))
}

func joinArrow(parts []string) string {
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += " -> "
		}
		out += p
	}
	return out
}
