package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/postgres"
	"github.com/surgepay/surgepay/webhook"
)

// The dispatcher bounds its claims per endpoint with this capability.
var _ webhook.BoundedClaimer = (*postgres.DB)(nil)

// TestWebhookEndpointLimitAcrossNodes: two stores on one schema (two API
// nodes) create endpoints for the same merchants at once; each merchant
// ends with exactly WebhookEndpointsPerMerchantMax, every other create
// refused with too_many_webhook_endpoints. Before the creates of a
// merchant were serialised, each transaction counted only the endpoints
// committed before it started, and concurrent ones passed the bound.
func TestWebhookEndpointLimitAcrossNodes(t *testing.T) {
	schema := newSchema(t)
	cfg := postgres.Config{DSN: testDSN(t), Schema: schema}
	nodes := []*postgres.DB{openAt(t, cfg), openAt(t, cfg)}
	const merchants, creates = 4, 4 * surgepay.WebhookEndpointsPerMerchantMax
	ms := make([]string, merchants)
	for i := range ms {
		m := &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "m", Created: now()}
		if err := nodes[0].Apply(t.Context(), &surgepay.Write{Merchant: m}); err != nil {
			t.Fatal(err)
		}
		ms[i] = m.ID
	}
	errs := make([][]error, merchants)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, m := range ms {
		errs[i] = make([]error, creates)
		for j := range creates {
			e := &surgepay.WebhookEndpoint{ID: surgepay.NewID("we"), MerchantID: m,
				URL: fmt.Sprintf("https://hooks.example.com/%d", j), SealedSecret: []byte{1}, Created: now()}
			wg.Go(func() {
				<-start
				errs[i][j] = nodes[j%len(nodes)].Apply(t.Context(), &surgepay.Write{WebhookEndpointInsert: e})
			})
		}
	}
	close(start)
	wg.Wait()
	conn, err := pgx.Connect(t.Context(), cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i, m := range ms {
		stored := 0
		for _, err := range errs[i] {
			switch {
			case err == nil:
				stored++
			case surgepay.ErrorReason(err) != "too_many_webhook_endpoints":
				t.Errorf("merchant %d: create: %v, want success or too_many_webhook_endpoints", i, err)
			}
		}
		if stored != surgepay.WebhookEndpointsPerMerchantMax {
			t.Errorf("merchant %d: %d of %d concurrent creates on 2 nodes succeeded, want %d", i, stored, creates,
				surgepay.WebhookEndpointsPerMerchantMax)
		}
		var n int
		// ListWebhookEndpoints stops at the bound: count the rows.
		q := "SELECT count(*) FROM " + pgx.Identifier{schema, "webhook_endpoints"}.Sanitize() + " WHERE merchant_id = $1"
		if err := conn.QueryRow(t.Context(), q, m).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != surgepay.WebhookEndpointsPerMerchantMax {
			t.Errorf("merchant %d: %d endpoints stored, want %d", i, n, surgepay.WebhookEndpointsPerMerchantMax)
		}
	}
}
