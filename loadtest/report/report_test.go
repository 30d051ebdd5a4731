package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteEscapesData: a value that spells a closing script tag must not
// end the data element early.
func TestWriteEscapesData(t *testing.T) {
	var b bytes.Buffer
	data := `{"started_at":"2026-01-01T00:00:00Z","config":{"profile":"</script><b>x</b>"},"warnings":["</script>"]}`
	if err := Write(&b, []byte(data)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, "</script>"); n != 3 {
		t.Errorf("page has %d </script> tags, want 3 (uPlot, data, report script)", n)
	}
	if strings.Contains(page, "<b>x</b>") {
		t.Errorf("title or data not escaped")
	}
}

func TestWriteRejectsInvalidJSON(t *testing.T) {
	if err := Write(&bytes.Buffer{}, []byte("{")); err == nil {
		t.Error("Write(invalid JSON): got nil error, want one")
	}
}
