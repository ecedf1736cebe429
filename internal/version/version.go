// Package version says which build of mvq is running. make build stamps
// Version and Commit with -ldflags -X; a build without them (go build,
// go install) falls back to the module version and VCS revision Go records
// in the binary.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped by the Makefile: -X github.com/mvq-dev/mvq/internal/version.Version=...
var (
	Version = ""
	Commit  = ""
)

// Info is the version and commit of this binary: the stamped values, else
// the build info's module version and vcs.revision (with "+dirty" when the
// tree was modified), else "dev" and "unknown".
func Info() (version, commit string) {
	version, commit = Version, Commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		if commit == "" {
			var rev, dirty string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					if s.Value == "true" {
						dirty = "+dirty"
					}
				}
			}
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if rev != "" {
				commit = rev + dirty
			}
		}
	}
	if version == "" {
		version = "dev"
	}
	if commit == "" {
		commit = "unknown"
	}
	return version, commit
}

// String is the line --version prints: "mvq api v0.3.0 (commit abc123, go1.26.0 linux/amd64)".
func String(binary string) string {
	v, c := Info()
	return fmt.Sprintf("%s %s (commit %s, %s %s/%s)", binary, v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
