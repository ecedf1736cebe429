package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The S3 test mode. `make test-s3` builds SeaweedFS's `weed` once into a
// cache and runs the table, refresh and service suites with MVQ_TEST_S3=1
// and MVQ_TEST_WEED naming the binary: each test binary then starts one
// `weed mini` on loopback ports (S3ForTestMain) and every warehouse a
// test opens through Warehouse or WarehouseFor is a prefix of one bucket
// on it. Without MVQ_TEST_S3 the same tests use file:// warehouses.
const (
	envS3      = "MVQ_TEST_S3"     // "1": run warehouses on S3
	envWeed    = "MVQ_TEST_WEED"   // path of the weed binary
	envS3URL   = "MVQ_TEST_S3_URL" // set by S3ForTestMain for the test and its helper processes
	s3Bucket   = "mvq"
	s3KeyID    = "mvqtest"
	s3Secret   = "mvqtest-secret"
	s3Region   = "us-east-1"
	weedConfig = `{"identities":[{"name":"mvq","credentials":[{"accessKey":"` + s3KeyID + `","secretKey":"` + s3Secret + `"}],"actions":["Admin","Read","Write","List","Tagging"]}]}`
)

// S3Mode reports whether warehouses are on S3 in this run.
func S3Mode() bool { return os.Getenv(envS3URL) != "" || os.Getenv(envS3) == "1" }

// Weed is a running `weed mini` serving S3.
type Weed struct {
	Endpoint string // http://127.0.0.1:PORT
	stop     func()
}

// Stop kills the server and removes its data.
func (w *Weed) Stop() { w.stop() }

// URL is the s3:// warehouse URL of prefix in the test bucket, with the
// endpoint, path-style addressing and region as query parameters (the
// credentials come from the AWS_* variables S3ForTestMain sets).
func (w *Weed) URL(prefix string) string {
	q := url.Values{"endpoint": {w.Endpoint}, "use_path_style": {"true"}, "region": {s3Region}}
	return "s3://" + s3Bucket + "/" + strings.Trim(prefix, "/") + "?" + q.Encode()
}

// Env is the environment a process needs to reach the server: the AWS
// credential variables.
func (w *Weed) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s3KeyID, "AWS_SECRET_ACCESS_KEY=" + s3Secret, "AWS_REGION=" + s3Region,
		"AWS_EC2_METADATA_DISABLED=true"}
}

// WeedBinary returns the weed binary MVQ_TEST_WEED names, or an error
// saying how to get one.
func WeedBinary() (string, error) {
	p := os.Getenv(envWeed)
	if p == "" {
		return "", fmt.Errorf("MVQ_TEST_WEED is not set: run `make test-s3`, which builds SeaweedFS's weed into ~/.cache/mvq and sets it")
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("MVQ_TEST_WEED %q: %w (run `make weed`)", p, err)
	}
	return p, nil
}

// StartWeed starts `weed mini` with S3 on free loopback ports, one bucket
// and one access key, and waits until S3 answers. The caller stops it.
func StartWeed() (*Weed, error) {
	bin, err := WeedBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mvq-weed-")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfg, []byte(weedConfig), 0o600); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	// Every listener gets a port of its own: weed's default for a gRPC
	// port is the HTTP port + 10000, which may be taken.
	names := []string{"master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc"}
	ports, err := freePorts(len(names))
	if err != nil {
		return nil, err
	}
	args := []string{"mini", "-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3.config=" + cfg, "-bucket=" + s3Bucket,
		"-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
		"-master.volumeSizeLimitMB=64", "-volume.max=0", "-filer.localSocket=" + filepath.Join(dir, "filer.sock"),
		"-s3.localSocket=" + filepath.Join(dir, "s3.sock")}
	for i, n := range names {
		args = append(args, fmt.Sprintf("-%s=%d", n, ports[i]))
	}
	s3Port := ports[6]
	logf, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start weed: %w", err)
	}
	w := &Weed{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", s3Port)}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = os.RemoveAll(dir)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if ready(w.Endpoint) {
			break
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "weed.log"))
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("weed mini exited before S3 answered:\n%s", tail(log, 4000))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "weed.log"))
			stop()
			return nil, fmt.Errorf("weed mini: S3 on %s did not answer in 90s:\n%s", w.Endpoint, tail(log, 4000))
		}
	}
	w.stop = stop
	return w, nil
}

// ready reports whether S3 serves the test bucket to the test key: a
// signed HeadBucket succeeds (weed creates the bucket after S3 answers).
func ready(endpoint string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	client := s3.New(s3.Options{
		Region:       s3Region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s3KeyID, s3Secret, ""),
		HTTPClient:   &http.Client{Timeout: 2 * time.Second},
	})
	_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s3Bucket)})
	return err == nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// S3ForTestMain runs m. In S3 mode (MVQ_TEST_S3=1) it first starts one
// weed server for the whole test binary and exports its URL and the AWS
// credentials to this process and the helper processes tests start; a
// helper process (MVQ_TEST_S3_URL already set) uses its parent's server.
func S3ForTestMain(m interface{ Run() int }) int {
	if os.Getenv(envS3) != "1" || os.Getenv(envS3URL) != "" {
		return m.Run()
	}
	w, err := StartWeed()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer w.Stop()
	for _, kv := range w.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	os.Setenv(envS3URL, w.URL(""))
	return m.Run()
}

// Warehouse returns a fresh, empty warehouse root for tb: a file:// temp
// dir, or in S3 mode a prefix of its own in the test bucket.
func Warehouse(tb testing.TB) string { return WarehouseFor(tb.TempDir()) }

// WarehouseFor maps a directory to a warehouse root: file://dir, or in S3
// mode a bucket prefix named after dir, so a helper process given the
// same dir opens the same warehouse.
func WarehouseFor(dir string) string {
	base := os.Getenv(envS3URL)
	if base == "" {
		return "file://" + dir
	}
	u, err := url.Parse(base)
	if err != nil {
		panic(fmt.Sprintf("testenv: %s %q: %v", envS3URL, base, err))
	}
	h := sha256.Sum256([]byte(dir))
	u.Path = "/" + hex.EncodeToString(h[:8])
	return u.String()
}

// SkipUnlessFile skips a test that inspects warehouse files directly when
// warehouses are on S3.
func SkipUnlessFile(tb testing.TB) {
	tb.Helper()
	if os.Getenv(envS3URL) != "" {
		tb.Skip("reads warehouse files directly; covered by the file:// run")
	}
}
