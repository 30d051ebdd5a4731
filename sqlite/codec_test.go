package sqlite

import (
	"database/sql"
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/surgepay/surgepay"
)

// TestTransactionsColumn: payments.transactions round-trips every
// transaction exactly, the values it leaves out to the payment's row
// included, with their edge cases (a value that is the derived one, one
// that begins with "=", the zero time, a payment without created); rows in
// the earlier format read as before; and a sale's column takes at most
// 60 % of the earlier format's (246 bytes against 426).
func TestTransactionsColumn(t *testing.T) {
	created := time.Date(2026, 11, 28, 1, 2, 3, 456789012, time.UTC)
	sale := func() *surgepay.Payment {
		p := &surgepay.Payment{ID: "pay_01m8fqq850d5gbdmqprmfjya7m", AuthorizationRef: "auth_b3441cca_47d", Created: created}
		p.Transactions = []surgepay.Transaction{
			{ID: "txn_01m8fqq850d5gbdmqprn70v29x", Type: surgepay.TxAuthorization, Status: "succeeded", Amount: 19177,
				ProviderRef: p.AuthorizationRef, IdempotencyKey: "auth/mer_01m8fqq67eyrvj316xefae6587/8c4ba5de704a6d0d24a4908a", Created: created},
			{ID: "txn_01m8fqq850d5gbdmqprqned4z7", Type: surgepay.TxCapture, Status: "pending", Amount: 19177,
				IdempotencyKey: p.ID + "/capture", Created: created},
		}
		return p
	}
	odd := func() *surgepay.Payment {
		p := &surgepay.Payment{ID: "pay_2", AuthorizationRef: "=ref", Created: created}
		p.Transactions = []surgepay.Transaction{
			{ID: "t1", Type: surgepay.TxAuthorization, Status: "failed", Amount: 1, ProviderRef: "=", IdempotencyKey: "=",
				DeclineCode: "card_declined", Message: "declined", Created: created.Add(-time.Second)},
			{ID: "t2", Type: surgepay.TxAuthorization, Status: "succeeded", Amount: 2, ProviderRef: "=ref",
				IdempotencyKey: "pay_2/authorization", Created: created.Add(time.Hour)},
			{ID: "t3", Type: surgepay.TxRefund, Status: "pending", Amount: 3, ProviderRef: "==x", IdempotencyKey: "==y"},
			{ID: "t4", Type: surgepay.TxVoid, Status: "succeeded", Amount: 0, ProviderRef: "other", IdempotencyKey: "pay_2/capture", Created: created},
		}
		return p
	}
	undated := func() *surgepay.Payment { // no created: transactions count from 0
		p := &surgepay.Payment{ID: "pay_3"}
		p.Transactions = []surgepay.Transaction{
			{ID: "t1", Type: surgepay.TxCapture, Status: "succeeded", Amount: 5, Created: time.Unix(0, 0).UTC()},
			{ID: "t2", Type: surgepay.TxCapture, Status: "succeeded", Amount: 5},
			{ID: "t3", Type: surgepay.TxCapture, Status: "succeeded", Amount: 5, Created: created},
		}
		return p
	}
	for name, mk := range map[string]func() *surgepay.Payment{"Sale": sale, "Odd": odd, "Undated": undated} {
		t.Run(name, func(t *testing.T) {
			p := mk()
			arg, err := transactionsArg(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := transactionsOf(sql.NullString{String: arg.(string), Valid: true}, mk())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(p.Transactions, got); diff != "" {
				t.Errorf("round trip of %s (-want +got):\n%s", arg, diff)
			}
		})
	}

	p := sale()
	var v1 []txJSONv1
	for _, tx := range p.Transactions {
		n := tx.Created.UnixNano()
		v1 = append(v1, txJSONv1{ID: tx.ID, Type: tx.Type, Status: tx.Status, Amount: tx.Amount,
			ProviderRef: tx.ProviderRef, IdempotencyKey: tx.IdempotencyKey, Created: &n})
	}
	old, err := json.Marshal(v1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := transactionsOf(sql.NullString{String: string(old), Valid: true}, sale())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.Transactions, got); diff != "" {
		t.Errorf("a row in the earlier format (-want +got):\n%s", diff)
	}
	arg, err := transactionsArg(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(arg.(string)); 10*n > 6*len(old) {
		t.Errorf("a sale's transactions take %d bytes (%s), the earlier format %d: want at most 60 %%", n, arg, len(old))
	}
	if got, err := transactionsOf(sql.NullString{}, p); got != nil || err != nil {
		t.Errorf("NULL column: %v, %v; want nil", got, err)
	}
}

// TestTxJSONMatchesMarshal: appendTxJSON writes what json.Marshal writes
// for txJSON values filled at random (testing/quick: a field added to
// txJSON is filled and fails here until appendTxJSON writes it), zero
// values that omitempty drops, and strings that need escaping; and
// transactionsArg is the JSON array of them.
func TestTxJSONMatchesMarshal(t *testing.T) {
	rng := rand.New(rand.NewSource(20261128))
	odd := []string{"", `q"uo\te`, "\x00\x1f<&>", "bad \xff utf8", "line\u2028"}
	var all []txJSON
	for i := range 2000 {
		v, ok := quick.Value(reflect.TypeFor[txJSON](), rng)
		if !ok {
			t.Fatal("quick.Value(txJSON)")
		}
		tx := v.Interface().(txJSON)
		switch i % 4 {
		case 0:
			tx = txJSON{ID: odd[i/4%len(odd)], Message: odd[(i/4+1)%len(odd)]}
		case 1:
			tx.ProviderRef, tx.Created, tx.Zero = odd[i/4%len(odd)], 0, false
		}
		want, err := json.Marshal(tx)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendTxJSON(nil, &tx); string(got) != string(want) {
			t.Fatalf("appendTxJSON(%+v)\n got %s\nwant %s", tx, got, want)
		}
		all = append(all, tx)
	}
	p := &surgepay.Payment{ID: "pay_1", Created: time.Unix(100, 0)}
	for _, tx := range all[:50] {
		p.Transactions = append(p.Transactions, surgepay.Transaction{ID: tx.ID, Type: tx.Type, Status: tx.Status,
			Amount: tx.Amount, ProviderRef: tx.ProviderRef, DeclineCode: tx.DeclineCode, Message: tx.Message,
			Created: time.Unix(0, tx.Created)})
	}
	var out []txJSON
	for i := range p.Transactions {
		out = append(out, *txJSONOf(p, &p.Transactions[i]))
	}
	want, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := transactionsArg(p); err != nil || got != string(want) {
		t.Fatalf("transactionsArg = %v, %v\nwant %s", got, err, want)
	}
}

// TestDriverArgs: a sale's arguments reach the driver as database/sql
// would pass them: an int as an int64, a named string type as a string,
// the driver's own types as they are, numbered from 1; a type no driver
// takes is an error naming the argument.
func TestDriverArgs(t *testing.T) {
	created := time.Date(2026, 11, 28, 1, 2, 3, 0, time.UTC)
	in := []any{nil, 7, int64(8), surgepay.StatusSucceeded, "s", []byte{1}, 1.5, true, created, uint16(9)}
	got, err := driverArgs(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{nil, int64(7), int64(8), string(surgepay.StatusSucceeded), "s", []byte{1}, 1.5, true, created, int64(9)}
	if len(got) != len(want) {
		t.Fatalf("%d arguments, want %d", len(got), len(want))
	}
	for i, v := range got {
		if v.Ordinal != i+1 || v.Name != "" || !cmp.Equal(v.Value, want[i]) {
			t.Errorf("argument %d = %+v (%T), want ordinal %d value %v (%T)", i, v, v.Value, i+1, want[i], want[i])
		}
	}
	if _, err := driverArgs([]any{"a", struct{}{}}); err == nil || !strings.Contains(err.Error(), "argument 2") {
		t.Fatalf("a struct: err = %v, want one naming argument 2", err)
	}
}
