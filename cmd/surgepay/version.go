package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/surgepay/surgepay/internal/cli"
)

const versionUsage = `Usage: surgepay version   (or surgepay --version)

Prints the module version, the VCS commit it was built from ("unknown" when
the build recorded none, as with go run or -buildvcs=false; "+modified"
when the work tree had uncommitted changes) and the Go version.
`

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	c := cli.New("version", versionUsage)
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	fmt.Fprint(stdout, versionText(debug.ReadBuildInfo()))
	return cli.ExitOK
}

// versionText formats what `surgepay version` prints from the build
// information, which ok false (a binary built without module support)
// leaves unknown.
func versionText(bi *debug.BuildInfo, ok bool) string {
	version, commit, modified := "unknown", "unknown", ""
	if ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = "+modified"
				}
			}
		}
	}
	return fmt.Sprintf("surgepay %s\ncommit   %s%s\ngo       %s %s/%s\n",
		version, commit, modified, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
