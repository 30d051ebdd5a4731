package main

import (
	"context"
	"io"

	"github.com/surgepay/surgepay/loadtest"
)

func cmdLoadtest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return loadtest.Main(ctx, args, stdout, stderr)
}
