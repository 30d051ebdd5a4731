package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/surgepay/surgepay/internal/cli"
)

const versionUsage = `Usage: surgepay version   (or surgepay --version)

Prints the release, the VCS commit it was built from with the commit's
date, and the Go version:

  surgepay v1.2.3
  commit   0123abcd... (2026-03-01T12:30:45Z)
  go       go1.26.0 linux/amd64

A release build (.goreleaser.yaml) names them itself; any other build takes
them from the build information go build records: the module version
("(devel)" for a build of a work tree), vcs.revision ("+modified" when the
work tree had uncommitted changes) and vcs.time. A build that recorded none,
as with go run or -buildvcs=false, shows "unknown" and no date.
`

// The release build sets these with -ldflags "-X main.version=v1.2.3
// -X main.commit=<full hash> -X main.date=<RFC 3339>" (see
// .goreleaser.yaml). Set, each takes precedence over the build
// information; empty, as in every other build, it is read from there.
var (
	version string
	commit  string
	date    string
)

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	c := cli.New("version", versionUsage)
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprint(stdout, versionText(bi, ok))
	return cli.ExitOK
}

// buildVersion is what `surgepay version` reports.
type buildVersion struct {
	Release  string // "v1.2.3", "(devel)" or "unknown"
	Commit   string // the full VCS revision or "unknown"
	Modified bool   // the work tree had uncommitted changes
	Date     string // the commit's time, RFC 3339, or "" when not recorded
}

// readVersion takes the release, commit and date from the linker-set
// variables when set, else from bi, which ok false (a binary built without
// module support) leaves unknown.
func readVersion(bi *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Release: "unknown", Commit: "unknown"}
	if ok {
		if bi.Main.Version != "" {
			v.Release = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.Date = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	for _, ld := range []struct{ value, field *string }{{&version, &v.Release}, {&commit, &v.Commit}, {&date, &v.Date}} {
		if *ld.value != "" {
			*ld.field = *ld.value
		}
	}
	return v
}

// versionText formats what `surgepay version` prints: three lines, the
// release, the commit (with its date in parentheses when known), and the Go
// version and platform.
func versionText(bi *debug.BuildInfo, ok bool) string {
	v := readVersion(bi, ok)
	commitLine := v.Commit
	if v.Modified {
		commitLine += "+modified"
	}
	if v.Date != "" {
		commitLine += " (" + v.Date + ")"
	}
	return fmt.Sprintf("surgepay %s\ncommit   %s\ngo       %s %s/%s\n",
		v.Release, commitLine, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
