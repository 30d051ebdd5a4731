# The README's commands. `make test` is the whole suite; PostgreSQL suites
# run when SURGEPAY_TEST_POSTGRES_URL is set (.ci/run sets it).
GO ?= go

.PHONY: run test race lint bench fuzz build

run:
	$(GO) run ./cmd/surgepay serve

build:
	$(GO) build -o surgepay ./cmd/surgepay

test:
	$(GO) test -race -count=1 -timeout 30m ./...

race: test

lint:
	$(GO) vet ./...

bench:
	bash bench/run.sh

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodePayment -fuzztime 30s ./api/
	$(GO) test -run '^$$' -fuzz FuzzValidateAmount -fuzztime 30s .
