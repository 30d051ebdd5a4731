package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsCurlSendsJSON: every curl in the README and docs/ that sends a
// body (-d) says it is JSON. curl -d alone sends
// application/x-www-form-urlencoded, which the API refuses with 415; the
// README's auth array (used by its call function and by the docs' curls)
// carries the header.
func TestDocsCurlSendsJSON(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	// A shell command (not prose) running curl or the README's call with a body.
	command := regexp.MustCompile(`^\s*(\w+=\$\()?(curl|call)\b.* (-d|--data)\b`)
	const jsonHeader = `-H 'Content-Type: application/json'`
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	authLine := regexp.MustCompile(`(?m)^auth=\(.*\)`).FindString(string(readme))
	if !strings.Contains(authLine, jsonHeader) {
		t.Fatalf("README's auth array %q does not send %s", authLine, jsonHeader)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// A command is a line and its backslash continuations.
		text := strings.ReplaceAll(string(b), "\\\n", " ")
		for i, line := range strings.Split(text, "\n") {
			if !command.MatchString(line) {
				continue
			}
			if !strings.Contains(line, jsonHeader) && !strings.Contains(line, `"${auth[@]}"`) &&
				!regexp.MustCompile(`^\S+=\$\(call |^call `).MatchString(strings.TrimSpace(line)) {
				t.Errorf("%s: line %d sends a body without %s: %s", f, i+1, jsonHeader, line)
			}
		}
	}
}
