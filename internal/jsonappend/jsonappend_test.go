package jsonappend

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
	"testing/quick"
)

// odd are strings encoding/json escapes in every way it has.
var odd = []string{"", "plain", `q"uo\te`, "\x00\x01\b\f\n\r\t\x1f\x7f", "<a href='x'>&amp;</a>",
	"line\u2028para\u2029", "bad \xff\xfe utf8 \xc3", "émoji 🎉 日本", strings.Repeat("x", 300)}

// TestMatchesMarshal: String, Map, Int and Optional write what json.Marshal
// writes, for the odd strings and for random ones (testing/quick).
func TestMatchesMarshal(t *testing.T) {
	marshal := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	check := func(s string) bool {
		if got, want := string(String(nil, s)), marshal(s); got != want {
			t.Errorf("String(%q) = %s, json.Marshal %s", s, got, want)
			return false
		}
		type opt struct {
			S string `json:"s,omitempty"`
		}
		if got, want := "{"+strings.TrimPrefix(string(Optional(nil, `,"s":`, s)), ",")+"}", marshal(opt{s}); got != want {
			t.Errorf("Optional(%q) = %s, json.Marshal %s", s, got, want)
			return false
		}
		return true
	}
	for _, s := range odd {
		check(s)
	}
	if err := quick.Check(check, &quick.Config{MaxCount: 2000, Rand: rand.New(rand.NewSource(20261128))}); err != nil {
		t.Error(err)
	}
	if err := quick.Check(func(m map[string]string) bool {
		for i, s := range odd {
			if m == nil {
				break
			}
			m[s] = odd[(i+1)%len(odd)]
		}
		if got, want := string(Map(nil, m)), marshal(m); got != want {
			t.Errorf("Map = %s, json.Marshal %s", got, want)
			return false
		}
		return true
	}, &quick.Config{MaxCount: 300, Rand: rand.New(rand.NewSource(7))}); err != nil {
		t.Error(err)
	}
	if got, want := string(Map(nil, nil)), "null"; got != want {
		t.Errorf("Map(nil) = %s, want %s", got, want)
	}
	for _, v := range []int64{0, -1, 1 << 62, -1 << 63} {
		if got, want := string(Int(nil, `"n":`, v)), `"n":`+marshal(v); got != want {
			t.Errorf("Int(%d) = %s, want %s", v, got, want)
		}
	}
}
