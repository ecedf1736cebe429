// Package ui is the jobs console the API serves at /ui/: static files
// embedded in the binary (no build step), a page that talks to the same
// API as every other client, with the user's token.
//
// The files carry no tenant data and are served without credentials; the
// page asks for a token, keeps it in sessionStorage (this tab only, gone
// when it closes) and sends it as Authorization: Bearer on every API call.
// Job events are read with fetch() and a streamed body instead of
// EventSource, which cannot send headers: the token never goes into a URL,
// where logs and browser history would keep it.
package ui

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Config is what the page needs to know of the server.
type Config struct {
	// TraceURLTemplate (MVQ_TRACE_URL_TEMPLATE) links a job to its trace:
	// "{trace_id}" is replaced by the job's trace id. Empty: no link.
	TraceURLTemplate string `json:"trace_url_template"`
	// NotFound answers paths with no file (http.NotFound when nil).
	NotFound http.Handler `json:"-"`
}

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// Handler serves the console: Prefix is index.html, Prefix+"config.json"
// is cfg, other paths are the embedded files (404 when there is none).
func Handler(cfg Config) http.Handler {
	files, _ := fs.Sub(static, "static")
	conf, _ := json.Marshal(cfg)
	notFound := cfg.NotFound
	if notFound == nil {
		notFound = http.NotFoundHandler()
	}
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Scripts and styles come from this origin only; the page is
		// never framed, so a token typed into it cannot be clickjacked.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, Prefix)), "/")
		switch name {
		case "", "index.html":
			name = "index.html"
		case "config.json":
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(conf)
			return
		}
		if _, err := fs.Stat(files, name); err != nil {
			notFound.ServeHTTP(w, r)
			return
		}
		if name == "index.html" {
			// FileServer redirects /index.html to ./; serve it directly.
			b, _ := fs.ReadFile(files, name)
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(b)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		fileServer.ServeHTTP(w, r2)
	})
}
