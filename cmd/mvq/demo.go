package main

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/service"
)

//go:embed articles.json
var articles []byte

const chunkSpec = `{"chunker": "fixed", "input_column": "body", "output_column": "chunk", "chunk_size": 12, "chunk_overlap": 3, "unit": "words"}`

// demo drives an mvq API over HTTP as a user would: the server at MVQ_URL
// (the running `mvq dev`) when one answers and no -warehouse was given,
// else a dev server of its own on cfg.Warehouse with the same Redis a
// later `mvq dev` there uses, so that the demo's table, view and job show
// up wherever tables, views and jobs do (mvq view ls, the console).
func demo(ctx context.Context, a *app, cfg service.Config, ownWarehouse bool, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	running := !ownWarehouse && loopbackURL(a.url) && serverAnswers(ctx, a.url)
	if running {
		fmt.Fprintf(out, "using the mvq API at %s (its warehouse)\n\n", a.url)
	} else {
		addr, stop, err := startOwnServer(ctx, cfg)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(out, "no mvq API answers at %s: started one for the demo on warehouse %s (API http://%s)\n\n", a.url, cfg.Warehouse, addr)
		// From here on the commands talk to it: no credentials, it
		// authenticates none on loopback.
		a.url, a.token = "http://"+addr, ""
	}
	c := a.client()
	post := func(path string, body any, out any) error { return c.call(ctx, "POST", path, body, out) }

	post("/v1/namespace/demo/create", map[string]any{"mode": "exist_ok"}, nil)
	post("/v1/table/demo$article_chunks/drop", map[string]any{}, nil) // a rerun starts fresh
	post("/v1/table/demo$articles/drop", map[string]any{}, nil)
	var created map[string]any
	if err := post("/v1/table/demo$articles/create", json.RawMessage(articles), &created); err != nil {
		return err
	}
	fmt.Fprintf(out, "created table demo$articles (5 articles) at version %v\n", created["version"])

	sum := sha256.Sum256([]byte(chunkSpec))
	view := map[string]any{
		"kind":          "chunker",
		"source_query":  `SELECT id, title, body FROM "demo$articles" WHERE lang = 'en'`,
		"output_schema": "",
		"udtf_spec": map[string]any{
			"kind": "chunker", "udtf": base64.StdEncoding.EncodeToString([]byte(chunkSpec)),
			"udtf_sha": hex.EncodeToString(sum[:]), "udtf_name": "fixed_words", "udtf_version": "1",
		},
		"with_no_data": true,
	}
	if err := post("/v1/materialized_view/demo$article_chunks/create", view, nil); err != nil {
		return err
	}
	fmt.Fprintf(out, "created chunker view demo$article_chunks: %s\n", chunkSpec)
	id, err := a.submitRefresh("demo$article_chunks", map[string]any{"source_task_size": 2, "concurrency": 2})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "refresh job %s accepted; following its events:\n", id)
	if _, err := a.stream(ctx, id, "", func(e jobs.Event) {
		fmt.Fprintf(out, "  %-8v %-10v %-10v %v\n", e.Type, e.State, e.Phase, e.Message)
	}); err != nil {
		return err
	}
	final, err := a.getJob(id)
	if err != nil {
		return err
	}
	if final.State != jobs.StateDone {
		return fmt.Errorf("job ended %v: %v", final.State, final.Failure)
	}
	res, _ := json.Marshal(final.Result)
	fmt.Fprintf(out, "\njob DONE: %s\n\nview rows:\n", res)
	var rows []map[string]any
	if err := post("/v1/table/demo$article_chunks/query", map[string]any{}, &rows); err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(out, "  source %-14v chunk %v  %-24q %q\n", r["__source_row_id"], r["__chunk_index"], r["title"], r["chunk"])
	}
	fmt.Fprintf(out, "\n%d rows.\n", len(rows))
	if running {
		fmt.Fprintf(out, "See it with: mvq view show 'demo$article_chunks', mvq jobs show %s, or the console at %s/ui/\n", id, a.url)
	} else {
		fmt.Fprintf(out, "The table, the view and its job stay in %s: run `make run` (mvq dev) to keep a server up on it,\nthen mvq view show 'demo$article_chunks' or open the console.\n", cfg.Warehouse)
	}
	return nil
}

// startOwnServer starts the demo's dev server on cfg, run as mvq dev runs
// it (runDev: the runtime local-embed too), and returns its API's
// host:port once it listens, and stop, which ends the server and waits
// until it has (its redis-server flushed and stopped). The error is one the
// server stopped with before listening, or a start slower than a minute.
func startOwnServer(ctx context.Context, cfg service.Config) (addr string, stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- runDev(ctx, cfg, func(d service.DevAddrs) { addrc <- d.API }) }()
	stop = func() {
		cancel()
		<-errc
	}
	select {
	case addr := <-addrc:
		return addr, stop, nil
	case err := <-errc:
		cancel()
		return "", nil, err
	case <-time.After(60 * time.Second):
		stop()
		return "", nil, fmt.Errorf("dev server did not start")
	}
}

// loopbackURL reports whether base names this machine: the demo drops and
// recreates its demo$ tables, so it never works through a server
// elsewhere (a production API in MVQ_URL).
func loopbackURL(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// serverAnswers reports whether an mvq API answers /healthz at base
// within a second.
func serverAnswers(ctx context.Context, base string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
