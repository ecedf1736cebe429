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
	"net/http"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/service"
)

//go:embed articles.json
var articles []byte

const chunkSpec = `{"chunker": "fixed", "input_column": "body", "output_column": "chunk", "chunk_size": 12, "chunk_overlap": 3, "unit": "words"}`

// demo starts the dev server in-process and drives it over HTTP as a user
// would.
func demo(ctx context.Context, cfg service.Config, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- service.RunDevInMemory(ctx, cfg, func(a string) { addrc <- a }) }()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a
	case err := <-errc:
		return err
	case <-time.After(60 * time.Second):
		return fmt.Errorf("dev server did not start")
	}
	c := &demoClient{base: base}

	fmt.Fprintf(out, "warehouse %s, API %s\n\n", cfg.Warehouse, base)
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
	fmt.Fprintf(out, "\n%d rows. Run `make run` to keep the server up and use the API yourself.\n", len(rows))
	return nil
}

type demoClient struct{ base string }

func (c *demoClient) post(path, body string, out any) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
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
	resp, err := http.Get(c.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// follow prints the job's server-sent events until the stream ends.
func (c *demoClient) follow(ctx context.Context, id string, out io.Writer) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/job/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
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
