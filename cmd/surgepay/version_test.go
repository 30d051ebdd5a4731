package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// setLinkerVersion sets the variables a release build's -ldflags -X set,
// for the length of the test.
func setLinkerVersion(t *testing.T, v, c, d string) {
	t.Helper()
	old := [3]string{version, commit, date}
	version, commit, date = v, c, d
	t.Cleanup(func() { version, commit, date = old[0], old[1], old[2] })
}

func TestVersionText(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"},
		{Key: "vcs.time", Value: "2026-03-01T12:30:45Z"},
		{Key: "vcs.modified", Value: "false"},
	}}
	for _, tc := range []struct {
		name                string
		bi                  *debug.BuildInfo
		ok                  bool
		ldVersion, ldCommit string
		ldDate              string
		want                string // the first two lines
	}{
		{name: "BuildInfo", bi: vcs, ok: true,
			want: "surgepay v1.2.3\ncommit   0123abcd (2026-03-01T12:30:45Z)\n"},
		{name: "LinkerFlagsPreferred", bi: vcs, ok: true,
			ldVersion: "v2.0.0", ldCommit: "fedcba98", ldDate: "2026-04-02T08:00:00Z",
			want: "surgepay v2.0.0\ncommit   fedcba98 (2026-04-02T08:00:00Z)\n"},
		{name: "LinkerFlagsWithoutBuildInfo", bi: nil, ok: false,
			ldVersion: "v2.0.0", ldCommit: "fedcba98", ldDate: "2026-04-02T08:00:00Z",
			want: "surgepay v2.0.0\ncommit   fedcba98 (2026-04-02T08:00:00Z)\n"},
		{name: "LinkerVersionOnly", bi: vcs, ok: true, ldVersion: "v2.0.0",
			want: "surgepay v2.0.0\ncommit   0123abcd (2026-03-01T12:30:45Z)\n"},
		{name: "Devel", bi: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, ok: true,
			want: "surgepay (devel)\ncommit   unknown\n"},
		{name: "NoBuildInfo", bi: nil, ok: false,
			want: "surgepay unknown\ncommit   unknown\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setLinkerVersion(t, tc.ldVersion, tc.ldCommit, tc.ldDate)
			got := versionText(tc.bi, tc.ok)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want it to start %q", got, tc.want)
			}
			if n := strings.Count(got, "\n"); n != 3 {
				t.Errorf("got %d lines in %q, want 3", n, got)
			}
		})
	}
}
