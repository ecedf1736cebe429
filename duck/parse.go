package duck

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mvq-dev/mvq/internal/lru"
)

// DuckDB's own parser is the authority on what user SQL is: the text is
// handed to json_serialize_sql as a bound parameter (parsed, never run) in a
// database kept for parsing alone, and the parse tree decides. A hand
// lexer can disagree with DuckDB about where a comment or a string ends
// (DuckDB ends a -- comment at '\r' too); the parse tree cannot.

// refusedFunctions take SQL text, read or change session state, or reach
// memory or the engine outside the rows a query is given. They are refused
// anywhere in user SQL, in any position (scalar, aggregate, table).
var refusedFunctions = map[string]bool{
	"query": true, "query_table": true, // run SQL text
	"json_execute_serialized_sql": true, "json_serialize_sql": true,
	"json_deserialize_sql": true, "json_serialize_plan": true,
	"sql_auto_complete": true,
	"getvariable":       true, // session variables
	"checkpoint":        true, "force_checkpoint": true,
	"enable_logging": true, "disable_logging": true, "truncate_duckdb_logs": true,
	"enable_profiling": true, "disable_profiling": true,
	"enable_peg_parser": true, "disable_peg_parser": true, "check_peg_parser": true,
	"arrow_scan": true, "arrow_scan_dumb": true, // raw pointers
	"seq_scan": true, "which_secret": true, "duckdb_secrets": true,
	// settings, paths and the engine's identity, which an error message
	// (a failed cast) would show
	"current_setting": true, "current_schema": true, "current_schemas": true,
	"current_database": true, "current_catalog": true, "current_query": true,
	"current_role": true, "current_user": true, "session_user": true, "user": true,
	"current_connection_id": true, "current_query_id": true, "current_transaction_id": true,
	"get_block_size": true, "in_search_path": true,
}

// systemSchemas hold the catalog views and functions (pg_catalog's
// pg_settings and pg_proc, information_schema's tables); user SQL names
// neither, nor any function or table qualified by them.
var systemSchemas = map[string]bool{"pg_catalog": true, "information_schema": true}

// allowedSystemFunctions are pg_catalog functions that compute from their
// arguments alone.
var allowedSystemFunctions = map[string]bool{"pg_typeof": true, "pg_size_pretty": true}

// systemNames are what the parser database's own catalog says user SQL
// must not name: the internal views an unqualified name resolves to
// (duckdb_databases, pg_settings, sqlite_master, …) and the functions of
// systemSchemas. Read once from DuckDB itself, so a new version's
// additions are covered.
type systemNames struct {
	views     map[string]bool
	functions map[string]bool
}

func loadSystemNames(ctx context.Context, db *sql.DB) (systemNames, error) {
	n := systemNames{views: map[string]bool{}, functions: map[string]bool{}}
	read := func(q string, into map[string]bool) error {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return fmt.Errorf("duck: read system names: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			into[strings.ToLower(name)] = true
		}
		return rows.Err()
	}
	if err := read("SELECT DISTINCT view_name FROM duckdb_views() WHERE internal AND schema_name IN ('main', 'pg_catalog')", n.views); err != nil {
		return n, err
	}
	if err := read("SELECT DISTINCT function_name FROM duckdb_functions() WHERE schema_name IN ('pg_catalog', 'information_schema')", n.functions); err != nil {
		return n, err
	}
	for f := range allowedSystemFunctions {
		delete(n.functions, f)
	}
	if !n.views["pg_settings"] || !n.views["duckdb_databases"] {
		return n, fmt.Errorf("duck: the system views were not found (got %d)", len(n.views))
	}
	return n, nil
}

// tableFunctions are the only table functions user SQL may call in FROM:
// they generate rows from their arguments and touch nothing else.
var tableFunctions = map[string]bool{
	"range": true, "generate_series": true, "unnest": true,
	"json_each": true, "json_tree": true, "repeat": true, "repeat_row": true,
}

// Statement is one SELECT statement as DuckDB parsed it: the "node" of
// json_serialize_sql's output, as decoded JSON.
type Statement struct {
	Node map[string]any
}

// parse asks DuckDB to parse q and returns its statements, or an error
// that says why DuckDB refused the text (a syntax error, or a statement
// that is no SELECT).
func (d *DB) parse(ctx context.Context, q string) ([]map[string]any, error) {
	var out string
	if err := d.parser.QueryRowContext(ctx, "SELECT CAST(json_serialize_sql(?::VARCHAR) AS VARCHAR)", q).Scan(&out); err != nil {
		return nil, fmt.Errorf("parse: %w", cleanErr(err))
	}
	var res struct {
		Error        bool             `json:"error"`
		ErrorType    string           `json:"error_type"`
		ErrorMessage string           `json:"error_message"`
		Statements   []map[string]any `json:"statements"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if res.Error {
		msg := strings.TrimSpace(res.ErrorMessage)
		if strings.Contains(msg, "Only SELECT statements") {
			return nil, &SQLError{Err: fmt.Errorf("must be one SELECT statement")}
		}
		if res.ErrorType == "parser" {
			msg = "Parser Error: " + msg
		}
		return nil, &SQLError{Err: fmt.Errorf("%s", firstLine(msg))}
	}
	return res.Statements, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

// CheckSelect accepts q only if DuckDB parses it as exactly one SELECT
// statement (a trailing ';' is fine) that calls no refused function and no
// table function outside a short list of row generators. A refusal is a
// *SQLError saying why; other errors are the engine's.
//
// The answer is a function of the text alone, so it is cached by text:
// the work items of a refresh and the fragments of an update check the
// same text once. The returned Statement is shared; callers only read it.
func (d *DB) CheckSelect(ctx context.Context, q string) (*Statement, error) {
	if len(q) > MaxSQLBytes {
		return nil, &SQLError{Err: fmt.Errorf("longer than %d bytes", MaxSQLBytes)}
	}
	if v, ok := d.verdicts.Get(q); ok {
		return v.st, v.err
	}
	st, err := d.checkSelect(ctx, q)
	var se *SQLError
	if err == nil || errors.As(err, &se) {
		d.verdicts.Put(q, verdict{st, err}, int64(len(q))+verdictOverhead) // not the engine's errors, which may pass
	}
	return st, err
}

func (d *DB) checkSelect(ctx context.Context, q string) (*Statement, error) {
	stmts, err := d.parse(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, &SQLError{Err: fmt.Errorf("must be one SELECT statement (found %d statements)", len(stmts))}
	}
	node, _ := stmts[0]["node"].(map[string]any)
	if node == nil {
		return nil, &SQLError{Err: fmt.Errorf("must be one SELECT statement")}
	}
	if err := checkFunctions(node); err != nil {
		return nil, err
	}
	if err := d.checkSystemRefs(node); err != nil {
		return nil, err
	}
	return &Statement{Node: node}, nil
}

// checkSystemRefs refuses what reaches the engine's own catalog rather
// than the query's rows: tables named with a catalog or a schema
// (pg_catalog.pg_settings, information_schema.tables, main.duckdb_tables;
// a query's inputs are CTEs, which have neither), the
// internal views an unqualified name finds (pg_settings, pg_proc,
// duckdb_databases) unless the statement's own top-level WITH defines the
// name (the inputs Query aliases, the user's CTEs), SHOW and DESCRIBE in
// FROM, and functions of the system schemas (current_setting and the
// like are refusedFunctions).
func (d *DB) checkSystemRefs(node map[string]any) error {
	top := map[string]bool{}
	if m, ok := node["cte_map"].(map[string]any); ok {
		entries, _ := m["map"].([]any)
		for _, e := range entries {
			if em, _ := e.(map[string]any); em != nil {
				if k, ok := em["key"].(string); ok {
					top[strings.ToLower(k)] = true
				}
			}
		}
	}
	var bad []string
	Walk(node, func(obj map[string]any) {
		switch obj["type"] {
		case "BASE_TABLE":
			cat, _ := obj["catalog_name"].(string)
			sch, _ := obj["schema_name"].(string)
			name, _ := obj["table_name"].(string)
			lname := strings.ToLower(name)
			switch {
			case cat != "" || sch != "": // inputs are CTEs: no qualified name is one
				bad = append(bad, fmt.Sprintf("table %s", strings.Join(append(nonEmpty(cat, sch), name), ".")))
			case sch == "" && d.system.views[lname] && !top[lname]:
				bad = append(bad, fmt.Sprintf("system view %s", name))
			}
			return
		case "SHOW_REF":
			bad = append(bad, "SHOW and DESCRIBE")
			return
		}
		if obj["class"] != "FUNCTION" && obj["type"] != "FUNCTION" {
			return
		}
		name, ok := obj["function_name"].(string)
		if !ok {
			return
		}
		cat, _ := obj["catalog"].(string)
		sch, _ := obj["schema"].(string)
		if cat != "" || systemSchemas[strings.ToLower(sch)] || d.system.functions[strings.ToLower(name)] {
			bad = append(bad, fmt.Sprintf("function %s()", strings.Join(append(nonEmpty(cat, sch), name), ".")))
		}
	})
	if len(bad) > 0 {
		sort.Strings(bad)
		return &SQLError{Err: fmt.Errorf("%s not allowed in user SQL (the engine's catalog and settings are not readable)", bad[0])}
	}
	return nil
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// verdict is one of CheckSelect's answers, cached by SQL text.
type verdict struct {
	st  *Statement
	err error
}

// maxVerdictBytes bounds CheckSelect's cache of answers, counted as the
// SQL text's length plus verdictOverhead for the parsed statement: a
// thousand 16 KiB queries, or many more short ones.
const (
	maxVerdictBytes = 16 << 20
	verdictOverhead = 512
)

func newVerdictCache() *lru.Cache[string, verdict] {
	return lru.New[string, verdict](maxVerdictBytes)
}

// CheckExpression accepts expr only if it is one SQL expression: the text
// check of CheckExpressionText (so the parentheses callers wrap it in
// hold), then DuckDB's parse of "SELECT <expr>" must be a single select
// item with no FROM, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT or alias, and
// call no refused function. A refusal is a *SQLError.
func (d *DB) CheckExpression(ctx context.Context, expr string) error {
	if err := CheckExpressionText(expr); err != nil {
		return &SQLError{Err: err}
	}
	st, err := d.CheckSelect(ctx, "SELECT "+expr)
	if err != nil {
		return err
	}
	n := st.Node
	items, _ := n["select_list"].([]any)
	from, _ := n["from_table"].(map[string]any)
	switch {
	case n["type"] != "SELECT_NODE":
		return &SQLError{Err: fmt.Errorf("must be one expression (found a set operation)")}
	case len(items) != 1:
		return &SQLError{Err: fmt.Errorf("must be one expression (found %d, separated by commas)", len(items))}
	case from == nil || from["type"] != "EMPTY":
		return &SQLError{Err: fmt.Errorf("must be one expression (found a FROM clause)")}
	case n["where_clause"] != nil || n["having"] != nil || n["qualify"] != nil || n["sample"] != nil ||
		!emptyList(n["group_expressions"]) || !emptyList(n["modifiers"]):
		return &SQLError{Err: fmt.Errorf("must be one expression (found a clause after it)")}
	}
	if item, _ := items[0].(map[string]any); item != nil && item["alias"] != "" && item["alias"] != nil {
		return &SQLError{Err: fmt.Errorf("must be one expression (found an alias)")}
	}
	return nil
}

func emptyList(v any) bool {
	l, ok := v.([]any)
	return v == nil || (ok && len(l) == 0)
}

// checkFunctions walks a parse tree for function calls DuckDB would
// resolve by name.
func checkFunctions(node map[string]any) error {
	var bad []string
	Walk(node, func(obj map[string]any) {
		if obj["type"] == "TABLE_FUNCTION" {
			if f, _ := obj["function"].(map[string]any); f != nil {
				name, _ := f["function_name"].(string)
				if !tableFunctions[strings.ToLower(name)] {
					bad = append(bad, fmt.Sprintf("table function %s()", name))
				}
			}
		}
		if name, ok := obj["function_name"].(string); ok && refusedFunctions[strings.ToLower(name)] {
			bad = append(bad, fmt.Sprintf("function %s()", name))
		}
	})
	if len(bad) > 0 {
		sort.Strings(bad)
		return &SQLError{Err: fmt.Errorf("%s not allowed in user SQL", bad[0])}
	}
	return nil
}

// Walk calls fn on every JSON object in v, depth first.
func Walk(v any, fn func(obj map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(x)
		for _, c := range x {
			Walk(c, fn)
		}
	case []any:
		for _, c := range x {
			Walk(c, fn)
		}
	}
}

// TableRefs returns the base tables the statement names (catalog, schema
// and table name as written), and the names its common table expressions
// define, at any depth.
func (s *Statement) TableRefs() (tables [][3]string, ctes map[string]bool) {
	ctes = map[string]bool{}
	Walk(s.Node, func(obj map[string]any) {
		if obj["type"] == "BASE_TABLE" {
			cat, _ := obj["catalog_name"].(string)
			sch, _ := obj["schema_name"].(string)
			name, _ := obj["table_name"].(string)
			tables = append(tables, [3]string{cat, sch, name})
		}
		if m, ok := obj["cte_map"].(map[string]any); ok {
			entries, _ := m["map"].([]any)
			for _, e := range entries {
				if em, _ := e.(map[string]any); em != nil {
					if k, ok := em["key"].(string); ok {
						ctes[strings.ToLower(k)] = true
					}
				}
			}
		}
	})
	return tables, ctes
}

// openParser opens the database used only to parse: json_serialize_sql
// over bound parameters never executes the text, so its connections are
// shared and reused.
func openParser(settings []string, conns int) (*sql.DB, error) {
	db, err := openLocked(settings)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}
