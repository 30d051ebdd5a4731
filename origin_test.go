package surgepay

import "testing"

func TestCanonicalOrigin(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://shop.example", "https://shop.example"},
		{"HTTPS://SHOP.Example", "https://shop.example"},
		{"https://shop.example:443", "https://shop.example"},
		{"http://shop.example:80", "http://shop.example"},
		{"http://shop.example:443", "http://shop.example:443"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"https://xn--shp-sna.example", "https://xn--shp-sna.example"},
		{"https://shop.example/", ""},
		{"https://-shop.example", ""},
		{"https://shop..example", ""},
		{"https:shop.example", ""},
		{"https://shop.example:0", ""},
		{"https://shop.example:080", ""},
		{"https://shop.example#x", ""},
		{"https://shop.example\n", ""},
		{"", ""},
	}
	for _, tc := range tests {
		got, ok := CanonicalOrigin(tc.in)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("CanonicalOrigin(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

// TestValidOriginIsCanonical: a checkout origin of the configuration is
// compared with the Origin header as it is, so only the form browsers
// send passes.
func TestValidOriginIsCanonical(t *testing.T) {
	for o, want := range map[string]bool{
		"https://shop.example": true, "http://127.0.0.1:8080": true, "https://shop.example.evil.example": true,
		"https://Shop.example": false, "https://shop.example:443": false, "https://shop.example/": false,
		"null": false, "javascript:alert(1)": false, "https://shop.example;x": false,
	} {
		if ValidOrigin(o) != want {
			t.Errorf("ValidOrigin(%q) = %v, want %v", o, !want, want)
		}
	}
}
