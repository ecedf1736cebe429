package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"
)

const (
	mimeJSON        = "application/json"
	mimeArrowStream = "application/vnd.apache.arrow.stream"
	mimeArrowFile   = "application/vnd.apache.arrow.file"
)

// openInput opens a table file as a request body: JSON rows as they are
// (NDJSON becomes an array), CSV and Parquet converted to an Arrow IPC
// stream, Arrow IPC passed through.
func (a *app) openInput(from, format string) (io.ReadCloser, string, error) {
	if format == "" {
		switch ext := strings.ToLower(filepath.Ext(from)); ext {
		case ".parquet", ".pq":
			format = "parquet"
		case ".csv":
			format = "csv"
		case ".ndjson", ".jsonl":
			format = "ndjson"
		case ".json":
			format = "json"
		case ".arrow", ".arrows", ".ipc", ".feather":
			format = "arrow"
		default:
			return nil, "", usageErr("--from %s: cannot tell the format from %q; pass --format parquet|csv|ndjson|json|arrow", from, ext)
		}
	}
	var raw []byte
	var err error
	if from == "-" {
		raw, err = io.ReadAll(a.stdin)
	} else {
		raw, err = os.ReadFile(from)
	}
	if err != nil {
		return nil, "", err
	}
	body := func(b []byte, ct string) (io.ReadCloser, string, error) {
		return io.NopCloser(bytes.NewReader(b)), ct, nil
	}
	switch format {
	case "json":
		return body(raw, mimeJSON)
	case "ndjson":
		var rows []json.RawMessage
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			if !json.Valid(line) {
				return nil, "", fmt.Errorf("%s line %d: not a JSON value", from, n)
			}
			rows = append(rows, append(json.RawMessage(nil), line...))
		}
		if err := sc.Err(); err != nil {
			return nil, "", fmt.Errorf("%s: %w", from, err)
		}
		b, _ := json.Marshal(rows)
		return body(b, mimeJSON)
	case "arrow":
		if bytes.HasPrefix(raw, []byte("ARROW1")) {
			return body(raw, mimeArrowFile)
		}
		return body(raw, mimeArrowStream)
	case "csv":
		r := csv.NewInferringReader(bytes.NewReader(raw), csv.WithHeader(true), csv.WithChunk(8192), csv.WithNullReader(true, ""))
		defer r.Release()
		b, err := toIPC(r)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", from, err)
		}
		return body(b, mimeArrowStream)
	case "parquet":
		pf, err := file.NewParquetReader(bytes.NewReader(raw))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", from, err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 8192}, memory.DefaultAllocator)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", from, err)
		}
		rr, err := fr.GetRecordReader(context.Background(), nil, nil)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", from, err)
		}
		defer rr.Release()
		b, err := toIPC(rr)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", from, err)
		}
		return body(b, mimeArrowStream)
	}
	return nil, "", usageErr("--format %q: want parquet, csv, ndjson, json or arrow", format)
}

// toIPC writes the records of r as one Arrow IPC stream.
func toIPC(r array.RecordReader) ([]byte, error) {
	var buf bytes.Buffer
	var w *ipc.Writer
	for r.Next() {
		rec := r.RecordBatch()
		if w == nil {
			w = ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
		}
		if err := w.Write(rec); err != nil {
			return nil, err
		}
	}
	if err := r.Err(); err != nil && err != io.EOF {
		return nil, err
	}
	if w == nil {
		w = ipc.NewWriter(&buf, ipc.WithSchema(r.Schema()))
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// printTable writes rows aligned in columns, under headers when given.
func printTable(w io.Writer, headers []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if headers != nil {
		fmt.Fprintln(tw, strings.Join(headers, "\t"))
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

func (a *app) queryCmd() *cobra.Command {
	var filter, columns, output string
	var limit int64
	c := &cobra.Command{
		Use:   "query TABLE",
		Short: "Print a table's (or view's) rows",
		Long: `Prints the rows of TABLE: an aligned table on a terminal, JSON rows otherwise;
--output json|csv|arrow|table chooses (arrow: an Arrow IPC stream).`,
		Example: "  mvq query 'docs$articles' --filter \"lang = 'en'\" --columns id,body --limit 10\n  mvq query 'docs$chunks' --output csv > chunks.csv",
		Args:    exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := map[string]any{}
			if filter != "" {
				req["filter"] = filter
			}
			if columns != "" {
				req["columns"] = columnNames(columns)
			}
			if cmd.Flags().Changed("limit") {
				if limit <= 0 {
					return usageErr("--limit %d: want a positive number of rows", limit)
				}
				req["limit"] = limit
			}
			return a.printQuery(args[0], req, output)
		},
	}
	c.Flags().StringVar(&filter, "filter", "", "SQL predicate the rows must match")
	c.Flags().StringVar(&columns, "columns", "", "comma-separated columns to return (default: all)")
	c.Flags().Int64Var(&limit, "limit", 0, "at most this many rows")
	c.Flags().StringVarP(&output, "output", "o", "", "table, json, csv or arrow (default: table on a terminal, json otherwise)")
	return c
}

// printQuery sends the query request req to table name and prints the
// rows as output says ("" : table on a terminal, json otherwise).
func (a *app) printQuery(name string, req map[string]any, output string) error {
	if output == "" {
		output = "json"
		if isTerminal(a.stdout) {
			output = "table"
		}
	}
	accept := mimeArrowStream
	switch output {
	case "json":
		accept = mimeJSON
	case "csv", "arrow", "table":
	default:
		return usageErr("--output %q: want table, json, csv or arrow", output)
	}
	b, _ := json.Marshal(req)
	resp, err := a.client().do(a.ctx, "POST", "/v1/table/"+idPath(name)+"/query", bytes.NewReader(b), mimeJSON, accept)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch output {
	case "json", "arrow":
		_, err := io.Copy(a.stdout, resp.Body)
		if err == nil && output == "json" {
			fmt.Fprintln(a.stdout)
		}
		return err
	}
	rdr, err := ipc.NewReader(resp.Body)
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	defer rdr.Release()
	if output == "csv" {
		w := csv.NewWriter(a.stdout, rdr.Schema(), csv.WithHeader(true), csv.WithNullWriter(""))
		for rdr.Next() {
			if err := w.Write(rdr.RecordBatch()); err != nil {
				return err
			}
		}
		if err := rdr.Err(); err != nil {
			return err
		}
		return w.Flush()
	}
	return writeAligned(a.stdout, rdr)
}

// writeAligned prints the records as an aligned table; long cells are cut
// to 60 characters.
func writeAligned(w io.Writer, rdr *ipc.Reader) error {
	schema := rdr.Schema()
	headers := make([]string, schema.NumFields())
	for i, f := range schema.Fields() {
		headers[i] = f.Name
	}
	var rows [][]string
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			row := make([]string, rec.NumCols())
			for c := range row {
				row[c] = cell(rec.Column(c), r)
			}
			rows = append(rows, row)
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	printTable(w, headers, rows)
	fmt.Fprintf(w, "(%d rows)\n", len(rows))
	return nil
}

func cell(col arrow.Array, i int) string {
	if col.IsNull(i) {
		return "NULL"
	}
	s := col.ValueStr(i)
	s = strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s)
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}

// columnNames is a query's "columns" member for a --columns list
// (comma-separated names; blanks dropped).
func columnNames(list string) map[string]any {
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return map[string]any{"column_names": names}
}
