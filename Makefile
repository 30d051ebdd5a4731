# The README's commands. `make test` is the whole suite; PostgreSQL suites
# run when SURGEPAY_TEST_POSTGRES_URL is set (.ci/run sets it).
GO ?= go

.PHONY: run test race lint bench fuzz build release-check release-snapshot

# run builds ./surgepay first, naming each package as it compiles (-v): on a
# fresh machine the first build takes minutes, and `go run` alone prints
# nothing until the server listens. A later run rebuilds only what changed.
run:
	@echo 'make run: building ./surgepay (the first build downloads modules and compiles for a few minutes)' >&2
	$(GO) build -v -o surgepay ./cmd/surgepay
	./surgepay serve

build:
	$(GO) build -o surgepay ./cmd/surgepay

# gotestsum runs the same go test (with -json) and ends with a summary: the
# packages that ran, each skipped test with its reason (a missing
# PostgreSQL, Redis, NATS or Chromium), and the closing
# "DONE N tests, M skipped, ..." line that CI reads. Under CI=true the
# tests fail instead of skipping when a dependency is missing.
GOTESTSUM ?= $(GO) run gotest.tools/gotestsum@v1.13.0

test:
	$(GOTESTSUM) --format pkgname --format-hide-empty-pkg \
		--raw-command -- $(GO) test -json -race -count=1 -timeout 30m ./...

race: test

# golangci-lint v2 runs the linters .golangci.yml names (errcheck, govet,
# staticcheck, gosec, revive, ...; each exclusion there says why). Findings
# are fixed or suppressed in place with //nolint:linter // reason. .ci/run
# installs it: go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
GOLANGCI_LINT ?= golangci-lint

lint:
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

# release-check validates .goreleaser.yaml and builds a snapshot for this
# platform into dist/ (the same build settings as a release: CGO off,
# -trimpath, PGO, the version, commit and date in ldflags; nothing is
# published), then checks that the binary reports them. release-snapshot
# builds every archive and checksum a release would (Linux and macOS, amd64
# and arm64): about 40 minutes from an empty cache on 2 cores, so CI runs
# release-check. .ci/run installs goreleaser:
# go install github.com/goreleaser/goreleaser/v2@v2.15.1
GORELEASER ?= goreleaser

release-check:
	$(GORELEASER) check
	$(GORELEASER) build --snapshot --clean --single-target
	$$(find dist -type f -name surgepay | head -1) version | \
		grep -E '^commit   [0-9a-f]{40} \([0-9]{4}-' >/dev/null

release-snapshot:
	$(GORELEASER) check
	$(GORELEASER) release --snapshot --clean --skip=publish

bench:
	bash bench/run.sh

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodePayment -fuzztime 30s ./api/
	$(GO) test -run '^$$' -fuzz FuzzFraming -fuzztime 30s ./api/
	$(GO) test -run '^$$' -fuzz FuzzValidateAmount -fuzztime 30s .
