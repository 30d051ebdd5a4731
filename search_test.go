package surgepay

import (
	"testing"
	"time"
)

func TestIDAtOrdersWithNewID(t *testing.T) {
	// After every ID made so far: NewID does not go back to an earlier
	// millisecond than the last ID's (another test's may be later than now).
	lastID.Lock()
	at := time.UnixMilli(int64(max(lastID.ms+1000, uint64(time.Now().UnixMilli()))))
	lastID.Unlock()
	before, id, after := IDAt("pay", at.Add(-time.Millisecond)), newIDAt("pay", at), IDAt("pay", at.Add(time.Millisecond))
	if before >= id || id >= after {
		t.Fatalf("IDAt(t-1ms)=%s, NewID(t)=%s, IDAt(t+1ms)=%s: want them in that order", before, id, after)
	}
	if got := IDAt("pay", at); got > id || len(got) != len(id) {
		t.Fatalf("IDAt(t) = %s, want at most NewID(t) = %s and as long", got, id)
	}
}

func TestPaymentSearchValidate(t *testing.T) {
	ok := PaymentSearch{MerchantID: "mer_1", Limit: 10}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v, want nil", ok, err)
	}
	for name, q := range map[string]PaymentSearch{
		"ErrMerchantMissing": {Limit: 10},
		"ErrLimit":           {MerchantID: "mer_1", Limit: PaymentSearchLimitMax + 1},
		"ErrExamine":         {MerchantID: "mer_1", Limit: 1, ExamineMax: PaymentSearchExamineMax + 1},
		"ErrStatus":          {MerchantID: "mer_1", Limit: 1, Status: "paid"},
		"ErrAmountNegative":  {MerchantID: "mer_1", Limit: 1, AmountGTE: -1},
	} {
		t.Run(name, func(t *testing.T) {
			if err := q.Validate(); ErrorCode(err) != EINVALID {
				t.Fatalf("Validate(%+v) = %v, want %s", q, err, EINVALID)
			}
		})
	}
}

func TestPaymentSearchIDRange(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	q := PaymentSearch{CreatedGTE: at, CreatedBefore: at.Add(time.Hour)}
	from, before := q.IDRange()
	if from != IDAt("pay", at.Add(-PaymentSearchIDMargin)) || before != IDAt("pay", at.Add(time.Hour+PaymentSearchIDMargin)) {
		t.Fatalf("IDRange() = %s, %s: want the dates widened by the margin", from, before)
	}
	q.StartingAfter = IDAt("pay", at.Add(30*time.Minute))
	if _, before := q.IDRange(); before != q.StartingAfter {
		t.Fatalf("IDRange() before = %s, want the cursor %s (older than the date bound)", before, q.StartingAfter)
	}
}
