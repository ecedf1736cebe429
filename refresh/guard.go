package refresh

import (
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Hooks are what refresh installs on a catalog (table.Catalog.Use):
// direct writes to views are refused (refuseViewWrites), schema changes
// keep computed-column bindings true (keepBindings), and compaction
// rewrites the fragment ids in a view's watermark lineage and in the
// filled records of computed columns. NewEngine installs them on its
// catalog; whoever builds a catalog that may hold views and is not given
// to an engine installs them itself.
func Hooks() table.Hooks {
	return table.Hooks{
		Name:       "refresh",
		SchemaHook: keepBindings,
		WriteGuard: refuseViewWrites,
		Rewriters:  map[string]table.PropertyRewriter{propWatermark: compactLineage, propFilled: compactFilled},
	}
}

// refuseViewWrites refuses every direct write to a view (insert, update,
// delete, merge_insert, overwrite, version create, a schema change,
// rename): only its refreshes write it, since any other write would leave
// the view out of step with its source and its refresh watermark. Rename
// has its own message: the view's jobs know it by name.
func refuseViewWrites(id []string, m *table.Manifest, op string) error {
	if !m.IsView() {
		return nil
	}
	if op == "rename" {
		return errs.Errorf(errs.CodeInvalidInput, "%s is a materialized view: rename is not allowed (its jobs know it by name); create the view again under the new name", table.JoinID(id))
	}
	return errs.Errorf(errs.CodeInvalidInput, "%s is a materialized view: %s is not allowed; refresh it instead", table.JoinID(id), op)
}
