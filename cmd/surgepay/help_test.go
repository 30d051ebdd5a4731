package main

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// runTimeout bounds a command run by runIn.
const runTimeout = 30 * time.Second

// commandNames are every command and subcommand, as typed after surgepay
// ("" is surgepay itself).
var commandNames = []string{
	"", "serve", "settle", "trace", "migrate", "simulator", "version", "healthcheck",
	"keys", "keys create", "keys list", "keys revoke", "keys roll", "keys expire", "keys rotate",
	"keys rotate-signing", "keys retire-signing", "keys make-primary", "keys reencrypt", "keys retire",
	"merchants", "merchants create", "merchants list", "merchants show", "merchants disable", "merchants enable",
	"audit", "audit list", "keys settlement", "processors", "processors seal", "processors reseal", "processors check",
	"tax", "tax import",
	"webhooks", "webhooks endpoints", "webhooks deliveries", "webhooks resend", "webhooks roll-secret",
	"loadtest", "loadtest run", "loadtest compare", "loadtest merge", "loadtest table",
}

// runIn runs the command line args in an empty temporary working folder
// and returns its exit code, stdout and stderr, and the names in the
// folder afterwards. A command that should have stopped at once but runs
// (a server) is cancelled after runTimeout.
func runIn(t *testing.T, args ...string) (code int, stdout, stderr string, created []string) {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		created = append(created, e.Name())
	}
	return code, out.String(), errb.String(), created
}

// TestHelp: --help, -h and `help COMMAND` print the command's usage on
// stdout, nothing on stderr, exit 0 and create nothing (`tax import
// --help` used to import a file named --help, exit 1 and create data/).
func TestHelp(t *testing.T) {
	isolateEnv(t)
	for _, name := range commandNames {
		words := strings.Fields(name)
		for _, args := range [][]string{
			append(append([]string{}, words...), "--help"),
			append(append([]string{}, words...), "-h"),
			append([]string{"help"}, words...),
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr, created := runIn(t, args...)
				if code != 0 {
					t.Errorf("exit %d, want 0", code)
				}
				if !strings.Contains(stdout, "Usage") || !strings.Contains(stdout, strings.TrimSpace("surgepay "+name)) {
					t.Errorf("stdout is not the usage of %q:\n%s", name, stdout)
				}
				if stderr != "" {
					t.Errorf("stderr: got %q, want nothing", stderr)
				}
				if len(created) > 0 {
					t.Errorf("created %v, want nothing", created)
				}
			})
		}
	}
}

// TestHelpHintOnUnknownFlag: an unknown flag is a usage error: exit 2
// (loadtest: its documented ExitUsage, 1), one line on stderr that names
// the help to read, nothing on stdout and no file created.
func TestHelpHintOnUnknownFlag(t *testing.T) {
	isolateEnv(t)
	for _, name := range commandNames {
		args := append(strings.Fields(name), "--no-such-flag")
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr, created := runIn(t, args...)
			want := 2
			if strings.HasPrefix(name, "loadtest") {
				want = 1
			}
			if code != want {
				t.Errorf("exit %d, want %d", code, want)
			}
			if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); len(lines) != 1 ||
				!strings.Contains(stderr, strings.TrimSpace("surgepay help "+name)) {
				t.Errorf("stderr: got %q, want one line with a hint to `surgepay help %s`", stderr, name)
			}
			if stdout != "" || len(created) > 0 {
				t.Errorf("stdout %q, created %v, want nothing", stdout, created)
			}
		})
	}
}

// TestHelpMissingArgument: a missing argument is a usage error too.
func TestHelpMissingArgument(t *testing.T) {
	isolateEnv(t)
	for _, args := range [][]string{{}, {"keys"}, {"tax"}, {"tax", "import"}, {"keys", "settlement"}, {"help", "nope"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, _, stderr, created := runIn(t, args...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "surgepay help") || len(created) > 0 {
				t.Errorf("exit %d, stderr %q, created %v; want 2, one line with a hint, nothing", code, stderr, created)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	isolateEnv(t)
	for _, arg := range []string{"version", "--version"} {
		code, stdout, stderr, _ := runIn(t, arg)
		if code != 0 || stderr != "" {
			t.Errorf("%s: exit %d, stderr %q, want 0 and nothing", arg, code, stderr)
		}
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "surgepay ") || !strings.HasPrefix(lines[1], "commit ") ||
			!strings.Contains(lines[2], runtime.Version()) {
			t.Errorf("%s: got %q, want the version, commit and Go version", arg, stdout)
		}
	}
	t.Run("VCS", func(t *testing.T) {
		bi := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}
		if got := versionText(bi, true); !strings.Contains(got, "surgepay v1.2.3\n") || !strings.Contains(got, "commit   0123abcd+modified\n") {
			t.Errorf("got %q, want version v1.2.3 and commit 0123abcd+modified", got)
		}
	})
	t.Run("NoVCS", func(t *testing.T) {
		if got := versionText(&debug.BuildInfo{}, true); !strings.Contains(got, "surgepay unknown\ncommit   unknown\n") {
			t.Errorf("got %q, want version and commit unknown", got)
		}
		if got := versionText(nil, false); !strings.Contains(got, "commit   unknown\n") {
			t.Errorf("got %q, want commit unknown", got)
		}
	})
}
