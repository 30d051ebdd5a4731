package surgepay

import "testing"

// TestValidateMetadataControl: a NUL or other control character in a
// metadata key or value was stored (only the API's JSON check stood in
// front of it, for names and descriptions).
func TestValidateMetadataControl(t *testing.T) {
	for _, tt := range []struct {
		name  string
		m     map[string]string
		param string
	}{
		{"NULInValue", map[string]string{"order": "10\x001"}, "metadata.order"},
		{"NULInKey", map[string]string{"ord\x00er": "1"}, "metadata"},
		{"LineFeedInValue", map[string]string{"note": "a\nb"}, "metadata.note"},
		{"C1InValue", map[string]string{"note": "a\u0085"}, "metadata.note"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateMetadata("metadata", tt.m)
			e, ok := err.(*Error)
			if !ok || e.Reason != "invalid_characters" || e.Param != tt.param {
				t.Fatalf("got %v, want invalid_characters on %s", err, tt.param)
			}
		})
	}
	if err := ValidateMetadata("metadata", map[string]string{"note": "café ☕ \u200d"}); err != nil {
		t.Fatalf("plain text: got %v, want nil", err)
	}
}

// TestTextHasHidden: the format characters that hide text count, as the
// bidirectional ones did.
func TestTextHasHidden(t *testing.T) {
	for s, want := range map[string]bool{
		"Ada": false, "Zoë O'Brien — ☕": false, "Ada\t": true, "Pay\u200bPal": true, "Ada\u200d": true,
		"gi\u00adft": true, "\ufeffAda": true, "gift \u202eroF": true, "a\u2066b": true,
	} {
		if got := TextHasHidden(s); got != want {
			t.Errorf("TextHasHidden(%q): got %v, want %v", s, got, want)
		}
	}
}
