// Command gendoc writes docs/configuration.md from the configuration
// model: go generate ./config/ runs it.
package main

import (
	"fmt"
	"os"

	"github.com/surgepay/surgepay/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendoc FILE")
		os.Exit(2)
	}
	b, err := config.Reference()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	//nolint:gosec // G306: docs/configuration.md is a document of the repository, meant to be read by everyone
	if err := os.WriteFile(os.Args[1], b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
