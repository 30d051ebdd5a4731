// Package storetest is the conformance suite every surgepay.Store runs.
// A store's own test calls Run with a function that opens a fresh, empty
// store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) surgepay.Store {
//			s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "db")})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// What the suite requires of a store, beyond the comments on surgepay.Store:
//   - Times round-trip to the microsecond (the precision of PostgreSQL's
//     timestamptz) and come back in UTC; the suite only uses times truncated
//     to microseconds.
//   - Nil and empty maps, slices and byte slices may come back either way.
//   - ListEvents returns a payment's events in the order they were written
//     (the order of Write.Events, then of the Writes), whatever their IDs.
//   - Reads count one statement each and writes one statement per row kind
//     (see StatementCounts); events of one Write are one statement. A sale
//     (PaymentInsert, perhaps Idempotency, nothing else but Events) is ONE
//     statement, two with Events, stored or refused (see
//     SaleStatementCounts): the standard purchase is two.
//   - Close may be called more than once (the suite closes the store in one
//     subtest and open's cleanup closes it again); Apply after Close
//     returns an error.
//   - If the store has a CommitStats() groupcommit.Stats method, concurrent
//     Applies must be committed in fewer batches than writes.
//   - A store with the surgepay.StagedStore capability stores a streamlined
//     sale (PaymentInsert and Staged, perhaps Idempotency) with ONE
//     statement too, two with Events; Write.StagedAck is one DELETE, and
//     acknowledging a record that is gone is not an error. The staged
//     tests skip a store without the capability.
//   - Write.Analytics: the deltas of the Writes of a batch whose guards
//     held are added in the batch's transaction with ONE statement, counted
//     once on each of those Writes (a sale with deltas is two statements);
//     a refused Write adds nothing, and no Write with deltas, no statement.
//     ListAnalytics and ListRecentPaymentMethods are one SELECT each.
//
// Subtests run in parallel, each on its own store from open.
package storetest

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/surgepay/surgepay"
)

// Run runs the conformance suite against the stores that open returns.
// open must return a fresh, empty store for each call and arrange its own
// Close (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) surgepay.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s surgepay.Store)
	}{
		{"MerchantInsertFindList", testMerchantInsertFindList},
		{"MerchantFindErrNotFound", testMerchantFindErrNotFound},
		{"APIKeyFindByHash", testAPIKeyFindByHash},
		{"APIKeyFindByHashErrNotFound", testAPIKeyFindByHashErrNotFound},
		{"APIKeyRevoke", testAPIKeyRevoke},
		{"MerchantDisableEnable", testMerchantDisableEnable},
		{"APIKeyExpireEarlierWins", testAPIKeyExpireEarlierWins},
		{"APIKeysUsedLaterWins", testAPIKeysUsedLaterWins},
		{"AuditListFilterPage", testAuditListFilterPage},
		{"AuditAtomicWithChange", testAuditAtomicWithChange},
		{"LifecycleStatementCounts", testLifecycleStatementCounts},
		{"CredentialsGeneration", testCredentialsGeneration},

		{"CustomerInsertFind", testCustomerInsertFind},
		{"CustomerUpdate", testCustomerUpdate},
		{"CustomerUpdateErrStale", testCustomerUpdateErrStale},
		{"CustomerUpdateErrNotFound", testCustomerUpdateErrNotFound},
		{"CustomerDeleteDeletesPaymentMethods", testCustomerDeleteDeletesPaymentMethods},
		{"CustomerDeleteErrStale", testCustomerDeleteErrStale},
		{"CustomerDeleteErrNotFound", testCustomerDeleteErrNotFound},
		{"CustomerListPagination", testCustomerListPagination},

		{"PaymentMethodInsertFindDelete", testPaymentMethodInsertFindDelete},
		{"PaymentMethodListByCustomer", testPaymentMethodListByCustomer},

		{"PaymentRoundTripEveryField", testPaymentRoundTripEveryField},
		{"PaymentRoundTripMinimal", testPaymentRoundTripMinimal},
		{"PaymentUpdate", testPaymentUpdate},
		{"PaymentFindByRef", testPaymentFindByRef},
		{"PaymentUpdateErrStale", testPaymentUpdateErrStale},
		{"PaymentUpdateErrNotFound", testPaymentUpdateErrNotFound},
		{"PaymentListPagination", testPaymentListPagination},
		{"PaymentListFilters", testPaymentListFilters},
		{"ListProcessingOldestFirstAcrossMerchants", testListProcessing},
		{"ListProcessingThenRequiresAction", testListProcessingRequiresAction},

		{"EventsOldestFirst", testEventsOldestFirst},
		{"EventsImmutable", testEventsImmutable},

		{"IdempotencyInsertFind", testIdempotencyInsertFind},
		{"IdempotencyConflictStoresNothing", testIdempotencyConflictStoresNothing},
		{"IdempotencyKeyPerMerchant", testIdempotencyKeyPerMerchant},
		{"IdempotencyConcurrentConflicts", testIdempotencyConcurrentConflicts},
		{"DeleteIdempotencyBeforeLimit", testDeleteIdempotencyBeforeLimit},

		{"TenantIsolation", testTenantIsolation},
		{"StatementCounts", testStatementCounts},
		{"GroupCommitConcurrentApplies", testGroupCommitConcurrentApplies},
		{"ApplyAfterCloseErr", testApplyAfterCloseErr},

		{"SaleStatementCounts", testSaleStatementCounts},
		{"SaleIdempotencyConflict", testSaleIdempotencyConflict},
		{"SaleStoresWhatGeneralPathStores", testSaleStoresWhatGeneralPathStores},

		{"StagedSaleStatementCounts", testStagedSaleStatementCounts},
		{"StagedSaleIdempotencyConflict", testStagedSaleIdempotencyConflict},
		{"StagedSaleStoresWhatGeneralPathStores", testStagedSaleStoresWhatGeneralPathStores},
		{"FetchStagedOrderPagingMax", testFetchStagedOrderPagingMax},
		{"StagedBacklog", testStagedBacklog},
		{"StagedAckAtomicWithPaymentUpdate", testStagedAckAtomicWithPaymentUpdate},
		{"StagedAckMissingIsFine", testStagedAckMissingIsFine},
	}
	tests = append(tests, webhookTests...)
	tests = append(tests, analyticsTests...)
	tests = append(tests, searchTests...)
	tests = append(tests, disputeTests...)
	tests = append(tests, sealedTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// cmpOpts compare stored objects: times must be equal instants in UTC, and
// nil and empty collections are equal.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) && a.Location() == b.Location() }),
	cmpopts.EquateEmpty(),
}

// diff returns "" if got equals want.
func diff(want, got any) string { return cmp.Diff(want, got, cmpOpts) }

// now returns the current time at the precision every store keeps.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func apply(t *testing.T, s surgepay.Store, w *surgepay.Write) {
	t.Helper()
	if err := s.Apply(t.Context(), w); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// wantErr fails t unless err has the code and, if reason is not "", the reason.
func wantErr(t *testing.T, err error, code, reason string) {
	t.Helper()
	if got := surgepay.ErrorCode(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
	if got := surgepay.ErrorReason(err); reason != "" && got != reason {
		t.Fatalf("error = %v (reason %q), want reason %q", err, got, reason)
	}
}

// wantNotFound fails t unless err is ENOTFOUND; what names the call.
func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if got := surgepay.ErrorCode(err); got != surgepay.ENOTFOUND {
		t.Fatalf("%s: error = %v (code %q), want %q", what, err, got, surgepay.ENOTFOUND)
	}
}

// wantAllFieldsSet fails t if a field of the struct v points to is zero, so
// that a round-trip test covers every field, including ones added later.
func wantAllFieldsSet(t *testing.T, v any, notStored ...string) {
	t.Helper()
	rv := reflect.ValueOf(v).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if rv.Field(i).IsZero() && !slices.Contains(notStored, rv.Type().Field(i).Name) {
			t.Fatalf("fixture leaves %s.%s zero: set it so the round trip covers it",
				rv.Type().Name(), rv.Type().Field(i).Name)
		}
	}
}

// idsDesc returns the IDs sorted newest first, the order of every list.
func idsDesc(ids []string) []string {
	out := append([]string(nil), ids...)
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

func newMerchant(t *testing.T, s surgepay.Store) *surgepay.Merchant {
	t.Helper()
	m := &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "Merchant " + t.Name(), Created: now()}
	apply(t, s, &surgepay.Write{Merchant: m})
	return m
}

func sampleCustomer(merchantID string) *surgepay.Customer {
	t := now()
	return &surgepay.Customer{
		ID:          surgepay.NewID("cus"),
		MerchantID:  merchantID,
		Name:        "Zoë O'Brien",
		Email:       "zoe@example.com",
		Description: "a \"quoted\"\nmulti-line description; DROP TABLE customers;",
		Metadata:    map[string]string{"tier": "gold", "ref": "ünïcode ✓"},
		Created:     t,
		Updated:     t.Add(time.Second),
		Version:     1,
	}
}

func newCustomer(t *testing.T, s surgepay.Store, merchantID string) *surgepay.Customer {
	t.Helper()
	c := sampleCustomer(merchantID)
	apply(t, s, &surgepay.Write{CustomerInsert: c})
	return c
}

func samplePaymentMethod(merchantID, customerID string) *surgepay.PaymentMethod {
	return &surgepay.PaymentMethod{
		ID:          surgepay.NewID("pm"),
		MerchantID:  merchantID,
		CustomerID:  customerID,
		Brand:       surgepay.BrandVisa,
		Last4:       "4242",
		ExpMonth:    12,
		ExpYear:     2034,
		Fingerprint: "fp_" + strings.Repeat("ab", 16),
		HolderName:  "Zoë O'Brien",
		SealedPAN:   []byte{0x00, 0x01, 0xff, 0xfe, 'k', 'i', 'd', 0x00, 0x7f},
		Created:     now(),
		// A vault card has no token and a token no sealed number; the
		// store keeps whatever it is given, so the round trip sets both.
		Processor:         "stripe_eu",
		ProcessorToken:    "pm_1NfixtureTokenAbc",
		ProcessorCustomer: "cus_1NfixtureCustomer",
	}
}

func newPaymentMethod(t *testing.T, s surgepay.Store, merchantID, customerID string) *surgepay.PaymentMethod {
	t.Helper()
	pm := samplePaymentMethod(merchantID, customerID)
	apply(t, s, &surgepay.Write{PaymentMethodInsert: pm})
	return pm
}

// samplePayment returns an authorized payment with every field set.
func samplePayment(merchantID, customerID, paymentMethodID string) *surgepay.Payment {
	created := now()
	id := surgepay.NewID("pay")
	return &surgepay.Payment{
		ID:               id,
		MerchantID:       merchantID,
		CustomerID:       customerID,
		PaymentMethodID:  paymentMethodID,
		Amount:           10_000,
		AmountTax:        825,
		Currency:         "usd",
		CaptureMethod:    surgepay.CaptureManual,
		Status:           surgepay.StatusProcessing,
		AmountAuthorized: 10_825,
		AmountCaptured:   5_000,
		AmountRefunded:   1_000,
		Description:      "order #1 – ünïcode, \"quotes\", 'apostrophes'",
		Metadata:         map[string]string{"order_id": "1", "note": "a\tb"},
		Tax:              &surgepay.Tax{Country: "US", Region: "CA", PostalCode: "94107", Category: "general", RateBPS: 825},
		DeclineCode:      "do_not_honor",
		FailureMessage:   "an earlier attempt was declined",
		AuthorizationRef: "auth_0123456789",
		Transactions: []surgepay.Transaction{
			{ID: surgepay.NewID("tx"), Type: surgepay.TxAuthorization, Status: surgepay.TxSucceeded,
				Amount: 10_825, ProviderRef: "prov_1", IdempotencyKey: id + "/authorization",
				DeclineCode: "none", Message: "approved", Created: created,
				DueBy: created.Add(7 * 24 * time.Hour)}, // a dispute's field; any transaction round-trips it
			{ID: surgepay.NewID("tx"), Type: surgepay.TxCapture, Status: surgepay.TxPending,
				Amount: 5_000, ProviderRef: "prov_2", IdempotencyKey: id + "/capture",
				DeclineCode: "timeout", Message: "outcome unknown", Created: created.Add(time.Millisecond),
				DueBy: created.Add(21 * 24 * time.Hour)},
		},
		Pending: &surgepay.Pending{Type: surgepay.TxCapture, Amount: 5_000, IdempotencyKey: id + "/capture",
			Capture: true, CaptureLater: true, From: surgepay.StatusRequiresCapture, TxID: "tx_pending", Processor: "stripe_eu",
			ActionURL: "https://pay.example/simulator/v1/3ds/abc", ReturnURL: "https://shop.example/done?order=1",
			Reference: "stripe_eu:pi_3ds"},
		Path:    "streamlined",
		Version: 1,
		Created: created,
		Updated: created.Add(1500 * time.Microsecond),
	}
}

// minimalPayment returns a payment with only the fields every payment has.
func minimalPayment(merchantID string, status surgepay.Status) *surgepay.Payment {
	t := now()
	return &surgepay.Payment{
		ID:              surgepay.NewID("pay"),
		MerchantID:      merchantID,
		PaymentMethodID: surgepay.NewID("pm"),
		Amount:          500,
		Currency:        "eur",
		CaptureMethod:   surgepay.CaptureAutomatic,
		Status:          status,
		Path:            "standard",
		Version:         1,
		Created:         t,
		Updated:         t,
	}
}

func sampleEvent(p *surgepay.Payment, typ string, from, to surgepay.Status) *surgepay.Event {
	return &surgepay.Event{
		ID:         surgepay.NewID("evt"),
		PaymentID:  p.ID,
		MerchantID: p.MerchantID,
		Type:       typ,
		FromStatus: from,
		ToStatus:   to,
		Amount:     p.AmountTotal(),
		ActorKeyID: "key_test",
		RequestID:  "req_" + p.ID,
		Created:    now(),
	}
}

func sampleIdempotency(merchantID string) *surgepay.IdempotencyRecord {
	body := []byte(`{"id":"pay_1","status":"succeeded"}` + "\x00\xff")
	return &surgepay.IdempotencyRecord{
		MerchantID:  merchantID,
		Key:         "idem-" + surgepay.NewID("k"),
		RequestHash: surgepay.RequestHash("POST", "/v1/payments", body),
		StatusCode:  201,
		Body:        body,
		Created:     now(),
	}
}

// purchase returns the Write of a sale: an idempotency record, the payment
// and its two events (authorization, capture).
func purchase(merchantID string) (*surgepay.Write, *surgepay.Payment) {
	p := minimalPayment(merchantID, surgepay.StatusSucceeded)
	p.AmountAuthorized, p.AmountCaptured = p.Amount, p.Amount
	w := &surgepay.Write{
		Idempotency:   sampleIdempotency(merchantID),
		PaymentInsert: p,
		Events: []*surgepay.Event{
			sampleEvent(p, surgepay.TxAuthorization, "", surgepay.StatusRequiresCapture),
			sampleEvent(p, surgepay.TxCapture, surgepay.StatusRequiresCapture, surgepay.StatusSucceeded),
		},
	}
	return w, p
}

func findPayment(t *testing.T, s surgepay.Store, merchantID, id string) *surgepay.Payment {
	t.Helper()
	p, err := s.FindPayment(t.Context(), merchantID, id)
	if err != nil {
		t.Fatalf("FindPayment(%s): %v", id, err)
	}
	return p
}

// ctxCounter returns a context carrying a fresh statement counter.
func ctxCounter(t *testing.T) (context.Context, *surgepay.StatementCounter) {
	c := &surgepay.StatementCounter{}
	return surgepay.WithStatementCounter(t.Context(), c), c
}
