package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// payRow is a payment as the promoted database holds it.
type payRow struct {
	merchant                       string
	status                         string
	amount                         int64
	authorized, captured, refunded int64
}

// effects is the card network's record of one payment (the simulator's
// GET /v1/effects?payment=ID) or of all (without payment).
type effects struct {
	Authorizations   int64 `json:"authorizations"`
	Captures         int64 `json:"captures"`
	Refunds          int64 `json:"refunds"`
	AmountAuthorized int64 `json:"amount_authorized"`
	AmountCaptured   int64 `json:"amount_captured"`
	AmountRefunded   int64 `json:"amount_refunded"`
}

type totals struct {
	Authorizations   int64            `json:"authorizations"`
	Captures         int64            `json:"captures"`
	AmountAuthorized map[string]int64 `json:"amount_authorized"`
	AmountCaptured   map[string]int64 `json:"amount_captured"`
	AmountRefunded   map[string]int64 `json:"amount_refunded"`
}

type checker struct {
	failed bool
}

func (c *checker) fail(format string, args ...any) {
	c.failed = true
	log("FAIL: "+format, args...)
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	dir := fs.String("dir", "", "run's working folder")
	dsn := fs.String("dsn", "", "the cluster's PostgreSQL (the promoted primary)")
	sim := fs.String("simulator", "", "the shared card simulator's URL")
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for unknown outcomes and webhook deliveries to settle")
	clean := fs.String("clean", "rolling-restart", "phases in which every answer must be a 200 (comma-separated)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *dsn == "" || *sim == "" {
		return errors.New("check: -dir, -dsn and -simulator are required")
	}
	mers := []string{os.Getenv("STANDARD_MERCHANT"), os.Getenv("STREAMLINED_MERCHANT")}
	if mers[0] == "" || mers[1] == "" {
		return errors.New("check: STANDARD_MERCHANT and STREAMLINED_MERCHANT must be set (source the cluster's keys.env)")
	}
	buf, err := os.ReadFile(filepath.Join(*dir, "ledger.json"))
	if err != nil {
		return err
	}
	var l Ledger
	if err := json.Unmarshal(buf, &l); err != nil {
		return fmt.Errorf("ledger.json: %w", err)
	}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, *dsn)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close(ctx) }()
	c := &checker{}

	// What the merchant was told.
	for _, f := range l.Failures {
		c.fail("the client: %s", f)
	}
	if l.Dropped > 0 {
		c.fail("%d sales not started: %d in flight already", l.Dropped, flowsMax)
	}
	cleanPhase := map[string]bool{}
	for _, p := range strings.Split(*clean, ",") {
		cleanPhase[strings.TrimSpace(p)] = true
	}
	for _, p := range l.Phases {
		if p.Status500 > 0 {
			c.fail("phase %s: %d answers were 500", p.Name, p.Status500)
		}
		if p.NoRetryAfter > 0 {
			c.fail("phase %s: %d refusals (503, 429) without Retry-After", p.Name, p.NoRetryAfter)
		}
		if cleanPhase[p.Name] && p.Recovered > 0 {
			c.fail("phase %s: an answer was not 200 (%v)", p.Name, p.Statuses)
		}
	}

	// Unknown outcomes resolved, webhooks delivered: wait for both.
	deadline := time.Now().Add(*wait)
	var unresolved, undelivered, unreceived int
	for {
		if err := db.QueryRow(ctx, `SELECT count(*) FROM payments WHERE merchant_id = ANY($1)
			AND (status = 'processing' OR pending::text NOT IN ('null', '[]', '{}'))`, mers).Scan(&unresolved); err != nil {
			return err
		}
		if err := db.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE merchant_id = ANY($1)
			AND status <> 'succeeded'`, mers).Scan(&undelivered); err != nil {
			return err
		}
		received, err := readReceived(*dir)
		if err != nil {
			return err
		}
		if unreceived, err = countUnreceived(ctx, db, mers, received); err != nil {
			return err
		}
		if unresolved+undelivered+unreceived == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if unresolved > 0 {
		c.fail("%d payments still processing or with an operation pending at the processor after %s", unresolved, *wait)
	}
	if undelivered > 0 || unreceived > 0 {
		c.fail("webhooks: %d deliveries not succeeded, %d delivered events not received, after %s", undelivered, unreceived, *wait)
	}

	// Every sale answered 200 is in the promoted database, once; nothing
	// is there that the client was not answered for.
	rows, err := db.Query(ctx, `SELECT id, merchant_id, status, amount, amount_authorized, amount_captured, amount_refunded
		FROM payments WHERE merchant_id = ANY($1) AND created >= $2`, mers, l.Started.Add(-time.Second))
	if err != nil {
		return err
	}
	stored := map[string]payRow{}
	for rows.Next() {
		var id string
		var p payRow
		if err := rows.Scan(&id, &p.merchant, &p.status, &p.amount, &p.authorized, &p.captured, &p.refunded); err != nil {
			return err
		}
		stored[id] = p
	}
	if err := rows.Err(); err != nil {
		return err
	}
	answered := map[string]Sale{}
	var lost, twice int
	for _, s := range l.Sales {
		if _, ok := answered[s.Payment]; ok {
			twice++
		}
		answered[s.Payment] = s
		if _, ok := stored[s.Payment]; !ok {
			lost++
		}
	}
	var unanswered int
	for id := range stored {
		if _, ok := answered[id]; !ok {
			unanswered++
		}
	}
	log("sales answered 200: %d (%d refunded in part); in the promoted database: %d lost, %d answered under two keys, %d stored that no client was answered for",
		len(l.Sales), len(l.Refunds), lost, twice, unanswered)
	// A 200 "processing" is no success: the outcome was unknown, and the
	// reconciler has resolved it since (the merchant learns it by webhook).
	processing, became := 0, map[string]int{}
	for _, s := range l.Sales {
		if s.Status == "processing" {
			processing++
			became[stored[s.Payment].status]++
		}
	}
	if processing > 0 {
		log("of those, %d were answered \"processing\" (outcome unknown); resolved since: %v", processing, became)
	}
	if lost > 0 || twice > 0 || unanswered > 0 {
		c.fail("the promoted database does not hold exactly the sales answered 200")
	}

	// Refunds answered 200 are what the database refunded.
	wantRefunded := map[string]int64{}
	for _, r := range l.Refunds {
		wantRefunded[r.Payment] += r.Amount
	}
	// Each payment against the card network: one authorization, the same
	// amounts; the streamlined merchant's captured by settle.
	var mismatched, uncaptured, charged2 int
	for id, p := range stored {
		var e effects
		if err := getJSON(ctx, strings.TrimRight(*sim, "/")+"/v1/effects?payment="+url.QueryEscape(id), &e); err != nil {
			return err
		}
		if e.Authorizations > 1 {
			charged2++
			c.fail("payment %s: %d authorizations at the card network", id, e.Authorizations)
		}
		if e.AmountAuthorized != p.authorized || e.AmountCaptured != p.captured || e.AmountRefunded != p.refunded {
			mismatched++
			c.fail("payment %s: surgepay authorized/captured/refunded %d/%d/%d, the card network %d/%d/%d",
				id, p.authorized, p.captured, p.refunded, e.AmountAuthorized, e.AmountCaptured, e.AmountRefunded)
		}
		if p.status == "succeeded" || p.status == "partially_refunded" {
			if p.captured != p.amount {
				uncaptured++
				c.fail("payment %s (%s): captured %d of %d", id, p.status, p.captured, p.amount)
			}
		}
		if p.refunded != wantRefunded[id] {
			c.fail("payment %s: refunded %d, the client was answered 200 for %d", id, p.refunded, wantRefunded[id])
		}
	}
	log("payments against the card network: %d, %d charged twice, %d amounts differ, %d not captured", len(stored), charged2, mismatched, uncaptured)

	// The whole books, cluster up's own sales included.
	var n, nCaptured, sumAuth, sumCapt, sumRef int64
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE amount_authorized > 0), count(*) FILTER (WHERE amount_captured > 0),
		coalesce(sum(amount_authorized), 0), coalesce(sum(amount_captured), 0), coalesce(sum(amount_refunded), 0) FROM payments`).
		Scan(&n, &nCaptured, &sumAuth, &sumCapt, &sumRef); err != nil {
		return err
	}
	var t totals
	if err := getJSON(ctx, strings.TrimRight(*sim, "/")+"/v1/effects", &t); err != nil {
		return err
	}
	ours := fmt.Sprintf("%d payments, %d captured, %d/%d/%d authorized/captured/refunded", n, nCaptured, sumAuth, sumCapt, sumRef)
	theirs := fmt.Sprintf("%d payments, %d captured, %d/%d/%d authorized/captured/refunded", t.Authorizations, t.Captures,
		t.AmountAuthorized["usd"], t.AmountCaptured["usd"], t.AmountRefunded["usd"])
	log("books: surgepay %s; card network %s", ours, theirs)
	if ours != theirs {
		c.fail("surgepay's books and the card network's differ")
	}

	// Webhooks: every standard sale and every refund answered 200 was
	// told to the merchant's endpoint: a sale by payment.succeeded, or by
	// payment.failed if it was answered "processing" and the reconciler
	// found it failed.
	received, err := readReceived(*dir)
	if err != nil {
		return err
	}
	byPayment := map[string]map[string]bool{}
	for _, ev := range received {
		if byPayment[ev.payment] == nil {
			byPayment[ev.payment] = map[string]bool{}
		}
		byPayment[ev.payment][ev.typ] = true
	}
	var noSaleEvent, noRefundEvent int
	for _, s := range l.Sales {
		want := "payment.succeeded"
		if s.Status == "processing" && stored[s.Payment].status == "failed" {
			want = "payment.failed"
		}
		if s.Kind == "standard" && !byPayment[s.Payment][want] {
			noSaleEvent++
		}
	}
	for _, r := range l.Refunds {
		if !byPayment[r.Payment]["payment.refunded"] {
			noRefundEvent++
		}
	}
	log("webhooks: %d events received; standard sales without their outcome's event: %d; refunds without payment.refunded: %d",
		len(received), noSaleEvent, noRefundEvent)
	if noSaleEvent > 0 || noRefundEvent > 0 {
		c.fail("a sale or refund answered 200 was never told to the merchant's webhook endpoint")
	}
	if c.failed {
		return errors.New("the books differ (above)")
	}
	log("ok")
	return nil
}

type received struct {
	id, kind, typ, payment string
}

// readReceived reads webhooks.tsv (event ID, kind, type, payment ID).
func readReceived(dir string) ([]received, error) {
	f, err := os.Open(filepath.Join(dir, "webhooks.tsv")) //nolint:gosec // G304: the folder is the operator's -dir

	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []received
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), "\t")
		if len(p) == 4 {
			out = append(out, received{p[0], p[1], p[2], p[3]})
		}
	}
	return out, sc.Err()
}

// countUnreceived counts the events the database delivered (or queued)
// to the merchants' endpoints that the receiver has not got.
func countUnreceived(ctx context.Context, db *pgx.Conn, mers []string, got []received) (int, error) {
	have := make(map[string]bool, len(got))
	for _, r := range got {
		have[r.id] = true
	}
	rows, err := db.Query(ctx, `SELECT DISTINCT event_id FROM webhook_deliveries WHERE merchant_id = ANY($1)`, mers)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return 0, err
		}
		if !have[id] {
			n++
		}
	}
	return n, rows.Err()
}

func getJSON(ctx context.Context, u string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(out)
}
