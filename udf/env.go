package udf

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The environment of user code. An exec runtime's subprocesses get PATH,
// HOME and LANG of the worker and, from a manifest's env_vars, only the
// names the runtime's allowed_env lists. Some names are never allowed,
// whatever the runtimes file says: they make a program load or run other
// code than the operator's command (the dynamic loader's LD_*, an
// interpreter's startup, warning or module settings, a shell's startup
// file, a "run this browser/editor/pager" command), or redirect where it
// looks for programs and trust. An operator listing one gets an error
// when the file is read; a manifest naming one gets a 400.

// Bounds of a manifest's env_vars.
const (
	MaxEnvVars       = 32
	MaxEnvNameBytes  = 128
	MaxEnvValueBytes = 4096
)

// neverEnvPrefixes and neverEnvNames are compared upper-cased.
var neverEnvPrefixes = []string{
	"LD_", "DYLD_", "GLIBC_", "MALLOC_", "GCONV_",
	"PYTHON", "PIP_", "UV_", "CONDA",
	"BASH_FUNC_", "NODE_", "NPM_CONFIG_", "DENO_", "BUN_",
	"PERL", "RUBY", "GEM_", "BUNDLE_", "LUA_", "R_",
	"JAVA_", "_JAVA_", "JDK_", "GIT_", "CARGO", "RUST",
	"DOTNET_", "CORECLR_", "COMPlus_",
	"OPENSSL_", "SSL_", "XDG_",
}

var neverEnvNames = map[string]bool{
	"PATH": true, "HOME": true, "SHELL": true, "ENV": true, "BASH_ENV": true,
	"SHELLOPTS": true, "BASHOPTS": true, "PS4": true, "PROMPT_COMMAND": true,
	"IFS": true, "CDPATH": true, "GLOBIGNORE": true, "ZDOTDIR": true,
	"BROWSER": true, "EDITOR": true, "VISUAL": true, "PAGER": true, "MANPAGER": true,
	"LESSOPEN": true, "LESSCLOSE": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true,
	"CLASSPATH": true, "LOCPATH": true, "NLSPATH": true, "TZDIR": true,
	"HOSTALIASES": true, "RES_OPTIONS": true, "LOCALDOMAIN": true, "RESOLV_HOST_CONF": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true, "FTP_PROXY": true,
	"CURL_CA_BUNDLE": true, "REQUESTS_CA_BUNDLE": true, "TMPDIR": true,
	"TERMINFO": true, "INPUTRC": true, "GODEBUG": true, "GOFLAGS": true, "GOROOT": true,
	"GOPATH": true, "GOENV": true, "GOTOOLCHAIN": true, "GOPROXY": true,
}

// CheckEnvName refuses a name that is not a plain variable name
// ([A-Za-z_][A-Za-z0-9_]*, at most MaxEnvNameBytes) or that is never
// passed to user code.
func CheckEnvName(name string) error {
	if name == "" || len(name) > MaxEnvNameBytes {
		return fmt.Errorf("%q is not a variable name (1 to %d characters)", name, MaxEnvNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return fmt.Errorf("%q is not a variable name (letters, digits and _, not starting with a digit)", name)
	}
	up := strings.ToUpper(name)
	if neverEnvNames[up] {
		return fmt.Errorf("%s is never passed to user code: it changes which programs or code run", name)
	}
	for _, p := range neverEnvPrefixes {
		if strings.HasPrefix(up, strings.ToUpper(p)) {
			return fmt.Errorf("%s is never passed to user code: names starting %s change how programs load or run code", name, p)
		}
	}
	return nil
}

// CheckEnvValue refuses a value longer than MaxEnvValueBytes or holding
// a NUL, CR or LF.
func CheckEnvValue(v string) error {
	if len(v) > MaxEnvValueBytes {
		return fmt.Errorf("value of %d bytes (at most %d)", len(v), MaxEnvValueBytes)
	}
	if strings.ContainsAny(v, "\x00\r\n") {
		return fmt.Errorf("value holds a NUL or line break")
	}
	return nil
}

// CheckEnvVars checks a manifest's env_vars on their own: at most
// MaxEnvVars, every name allowed by CheckEnvName, every value by
// CheckEnvValue. Errors are *FieldError ("env_vars.NAME"), the first
// name in sorted order.
func CheckEnvVars(env map[string]string) error {
	if len(env) > MaxEnvVars {
		return fieldErr("env_vars", "%d variables (at most %d)", len(env), MaxEnvVars)
	}
	for _, k := range sortedKeys(env) {
		if err := CheckEnvName(k); err != nil {
			return fieldErr("env_vars."+fieldName(k), "%v", err)
		}
		if err := CheckEnvValue(env[k]); err != nil {
			return fieldErr("env_vars."+fieldName(k), "%v", err)
		}
	}
	return nil
}

// CheckEnv is CheckEnvVars, and every name one r allows.
func (r Runtime) CheckEnv(env map[string]string) error {
	if err := CheckEnvVars(env); err != nil {
		return err
	}
	for _, k := range sortedKeys(env) {
		if !slices.Contains(r.AllowedEnv, k) {
			allowed := "none"
			if len(r.AllowedEnv) > 0 {
				allowed = strings.Join(r.AllowedEnv, ", ")
			}
			return fieldErr("env_vars."+k, "runtime %s does not allow it (its allowed_env: %s)", r.Name, allowed)
		}
	}
	return nil
}

// fieldName is k fit to stand in a field path of a message.
func fieldName(k string) string {
	if len(k) > 64 {
		k = k[:64] + "…"
	}
	if strings.ContainsAny(k, " .\x00\r\n\"") || k == "" {
		return fmt.Sprintf("%q", k)
	}
	return k
}

func sortedKeys(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
