package main

import (
	"bufio"
	"bytes"
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
	"strings"
	"time"

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
	var c *demoClient
	running := false
	if !ownWarehouse && loopbackURL(a.url) && serverAnswers(ctx, a.url) {
		c = &demoClient{base: a.url, token: a.token}
		running = true
		fmt.Fprintf(out, "using the mvq API at %s (its warehouse)\n\n", a.url)
	} else {
		addrc := make(chan string, 1)
		errc := make(chan error, 1)
		go func() { errc <- service.RunDev(ctx, cfg, func(d service.DevAddrs) { addrc <- d.API }) }()
		select {
		case addr := <-addrc:
			c = &demoClient{base: "http://" + addr}
		case err := <-errc:
			return err
		case <-time.After(60 * time.Second):
			return fmt.Errorf("dev server did not start")
		}
		fmt.Fprintf(out, "no mvq API answers at %s: started one for the demo on warehouse %s (API %s)\n\n", a.url, cfg.Warehouse, c.base)
	}
	base := c.base

	c.post("/v1/namespace/demo/create", `{"mode": "exist_ok"}`, nil)
	c.post("/v1/table/demo$article_chunks/drop", `{}`, nil) // a rerun starts fresh
	c.post("/v1/table/demo$articles/drop", `{}`, nil)
	var created map[string]any
	if err := c.postJSON("/v1/table/demo$articles/create", string(articles), &created); err != nil {
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
	body, _ := json.Marshal(view)
	if err := c.postJSON("/v1/materialized_view/demo$article_chunks/create", string(body), nil); err != nil {
		return err
	}
	fmt.Fprintf(out, "created chunker view demo$article_chunks: %s\n", chunkSpec)
	var job map[string]any
	if err := c.postJSON("/v1/materialized_view/demo$article_chunks/refresh", `{"source_task_size": 2, "concurrency": 2}`, &job); err != nil {
		return err
	}
	id := job["job_id"].(string)
	fmt.Fprintf(out, "refresh job %s accepted; following its events:\n", id)
	if err := c.follow(ctx, id, out); err != nil {
		return err
	}
	var final map[string]any
	if err := c.get("/v1/job/"+id, &final); err != nil {
		return err
	}
	if final["state"] != "DONE" {
		return fmt.Errorf("job ended %v: %v", final["state"], final["failure"])
	}
	res, _ := json.Marshal(final["result"])
	fmt.Fprintf(out, "\njob DONE: %s\n\nview rows:\n", res)
	var rows []map[string]any
	if err := c.postJSON("/v1/table/demo$article_chunks/query", `{}`, &rows); err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(out, "  source %-14v chunk %v  %-24q %q\n", r["__source_row_id"], r["__chunk_index"], r["title"], r["chunk"])
	}
	fmt.Fprintf(out, "\n%d rows.\n", len(rows))
	if running {
		fmt.Fprintf(out, "See it with: mvq view show 'demo$article_chunks', mvq jobs show %s, or the console at %s/ui/\n", id, base)
	} else {
		fmt.Fprintf(out, "The table, the view and its job stay in %s: run `make run` (mvq dev) to keep a server up on it,\nthen mvq view show 'demo$article_chunks' or open the console.\n", cfg.Warehouse)
	}
	return nil
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

// demoClient calls the API with the command line's token, if any.
type demoClient struct{ base, token string }

func (c *demoClient) auth(req *http.Request) *http.Request {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req
}

func (c *demoClient) post(path, body string, out any) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(c.auth(req))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

func (c *demoClient) postJSON(path, body string, out any) error {
	_, err := c.post(path, body, out)
	return err
}

func (c *demoClient) get(path string, out any) error {
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	resp, err := http.DefaultClient.Do(c.auth(req))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// follow prints the job's server-sent events until the stream ends.
func (c *demoClient) follow(ctx context.Context, id string, out io.Writer) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/job/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(c.auth(req))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		fmt.Fprintf(out, "  %-8v %-10v %-10v %v\n", e["type"], e["state"], e["phase"], e["message"])
	}
	return sc.Err()
}
