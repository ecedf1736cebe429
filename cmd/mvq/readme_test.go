package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeBlock is a shell block of README.md and the line it starts on.
type readmeBlock struct {
	line int
	code string
	skip string // the reason of a <!-- readme-test: skip (...) --> marker
}

// readmeBlocks returns the ```sh and ```bash blocks of a Markdown file.
func readmeBlocks(md []byte) []readmeBlock {
	var out []readmeBlock
	var cur *readmeBlock
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && (line == "```sh" || line == "```bash"):
			cur = &readmeBlock{line: n + 1}
			if r, ok := strings.CutPrefix(prev, "<!-- readme-test: skip"); ok {
				cur.skip = strings.TrimSpace(strings.TrimSuffix(r, "-->"))
			}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		}
		prev = line
	}
	return out
}

// TestREADME runs README.md's shell blocks, in order, in one bash, against
// a real mvq dev on a free port: every command must exit 0 (curl fails on
// an HTTP error status here), so a README that rots fails the build. A
// block preceded by <!-- readme-test: skip (reason) --> is not run (servers
// that run until stopped). `make build` runs for real, into a temporary
// bin/ of the working folder the blocks run in.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries (minutes)")
	}
	for _, tool := range []string{"bash", "curl", "make", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run the README's commands", tool)
		}
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The commit make build stamps is HEAD as it is now: a commit made
	// while the blocks run must not fail the comparison at the end.
	head, headErr := exec.Command("git", "-C", repo, "rev-parse", "--short=12", "HEAD").Output()
	blocks := readmeBlocks(md)
	work := t.TempDir()
	d := startDev(t, filepath.Join(work, "warehouse"))
	addr := strings.TrimPrefix(d.url, "http://")

	var script strings.Builder
	script.WriteString(`set -eEuo pipefail
BLOCK=0
trap 'echo "README test: exit $? in the block at README.md:$BLOCK: $BASH_COMMAND" >&2' ERR
make() {
  if [ "$*" = build ]; then command make --no-print-directory -C "$MVQ_REPO" build BIN="$PWD/bin"
  else echo "README test: only 'make build' runs here, not 'make $*'" >&2; return 1; fi
}
curl() { command curl --fail-with-body -sS "$@"; }
`)
	ran := 0
	for _, b := range blocks {
		if b.skip != "" {
			t.Logf("README.md:%d not run: %s", b.line, b.skip)
			continue
		}
		code := strings.NewReplacer("localhost:2333", addr, "127.0.0.1:2333", addr).Replace(b.code)
		fmt.Fprintf(&script, "BLOCK=%d\necho '### README.md:%d'\n%s", b.line, b.line, code)
		ran++
	}
	script.WriteString("echo '### README test: every block ran'\n")
	if ran < 4 {
		t.Fatalf("only %d runnable shell blocks in README.md", ran)
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "MVQ_REPO="+repo, "MVQ_URL="+d.url, "MVQ_TOKEN=")
	out, err := cmd.CombinedOutput()
	t.Logf("README blocks output:\n%s", out)
	if err != nil || !strings.Contains(string(out), "### README test: every block ran") {
		t.Fatalf("README blocks failed: %v", err)
	}
	// make build stamped the version: the commit when git knows it.
	if headErr == nil {
		v, err := exec.Command(filepath.Join(work, "bin", "mvq"), "--version").Output()
		if err != nil || !strings.Contains(string(v), "(commit "+strings.TrimSpace(string(head))+")") {
			t.Fatalf("bin/mvq --version: %q %v, want commit %s", v, err, head)
		}
		for _, b := range []string{"api", "worker"} {
			v, err := exec.Command(filepath.Join(work, "bin", b), "-version").Output()
			if err != nil || !strings.Contains(string(v), "mvq "+b+" ") || !strings.Contains(string(v), strings.TrimSpace(string(head))) {
				t.Fatalf("bin/%s -version: %q %v", b, v, err)
			}
		}
	}
}

func TestReadmeBlocks(t *testing.T) {
	md := "x\n<!-- readme-test: skip (runs forever) -->\n```sh\nmake run\n```\n```yaml\na: 1\n```\n\n```sh\necho a\necho b\n```\n"
	got := readmeBlocks([]byte(md))
	if len(got) != 2 || got[0].skip != "(runs forever)" || got[0].code != "make run\n" || got[1].skip != "" || got[1].code != "echo a\necho b\n" || got[1].line != 11 {
		t.Fatalf("%+v", got)
	}
}

// TestBuildWithoutTheTag: a plain go build (no duckdb_arrow tag) stops with
// a message that says what to do, not only an undefined symbol.
func TestBuildWithoutTheTag(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	cmd := exec.Command(goBin, "build", "./duck")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	first := strings.SplitN(strings.TrimPrefix(string(out), "# github.com/mvq-dev/mvq/duck\n"), "\n", 2)[0]
	if err == nil || !strings.Contains(first, "mvq must be built with -tags=duckdb_arrow: run `make build`") {
		t.Fatalf("go build without the tag: %v\n%s", err, out)
	}
}
