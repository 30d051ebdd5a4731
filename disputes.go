package surgepay

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dispute statuses, as Stripe names them (a dispute's status at the
// processor; the simulator uses the same). An inquiry (warning_*) may
// become a chargeback (needs_response); prevented is a dispute the card
// network's programmes resolved before it was filed.
const (
	DisputeWarningNeedsResponse = "warning_needs_response"
	DisputeWarningUnderReview   = "warning_under_review"
	DisputeWarningClosed        = "warning_closed"
	DisputeNeedsResponse        = "needs_response"
	DisputeUnderReview          = "under_review"
	DisputeWon                  = "won"
	DisputeLost                 = "lost"
	DisputePrevented            = "prevented"
)

// DisputeStatuses are the statuses a dispute list filters by, in the
// order a dispute usually goes through them.
var DisputeStatuses = []string{DisputeWarningNeedsResponse, DisputeWarningUnderReview, DisputeWarningClosed,
	DisputeNeedsResponse, DisputeUnderReview, DisputeWon, DisputeLost, DisputePrevented}

// DisputeStatusesNeedingResponse are the statuses in which the merchant
// must answer before the dispute's deadline (DueBy) or lose it.
var DisputeStatusesNeedingResponse = []string{DisputeNeedsResponse, DisputeWarningNeedsResponse}

// Bounds of the dispute lists.
const (
	// DisputeListLimitMax bounds a page of ListDisputes.
	DisputeListLimitMax = ListLimitMax
	// DisputesPerWriteMax bounds Write.Disputes: a processor event
	// changes one dispute; a payment has a few.
	DisputesPerWriteMax = 16
	// disputeCursorBytesMax bounds a cursor's text (a merchant's and a
	// dispute's id, and a time).
	disputeCursorBytesMax = 400
)

// DisputeQuery selects disputes for an operator.
type DisputeQuery struct {
	MerchantID string   // "": every merchant's
	Statuses   []string // any of these (DisputeStatuses); none: any status
	// After is where the list goes on: the previous page's Next.
	After string
	Limit int // 1..DisputeListLimitMax
}

// Validate checks q: a known status at most once each, the limit, a
// cursor that parses.
func (q *DisputeQuery) Validate() error {
	if q.Limit < 1 || q.Limit > DisputeListLimitMax {
		return Invalid("limit", "invalid_value", "limit must be from 1 to %d", DisputeListLimitMax)
	}
	for i, s := range q.Statuses {
		if !slices.Contains(DisputeStatuses, s) {
			return Invalid("status", "invalid_value", "status %q is not a dispute status", s)
		}
		if slices.Contains(q.Statuses[:i], s) {
			return Invalid("status", "invalid_value", "status %q is given twice", s)
		}
	}
	if q.After != "" {
		if _, err := ParseDisputeCursor(q.After); err != nil {
			return err
		}
	}
	return nil
}

// DisputeCursor is a position in the order of ListDisputes: by DueBy,
// the zero time (unknown) last, then by ID, then by MerchantID.
type DisputeCursor struct {
	DueBy      time.Time
	ID         string
	MerchantID string
}

// CursorOf is the position of d.
func CursorOf(d *Dispute) DisputeCursor {
	return DisputeCursor{DueBy: d.DueBy, ID: d.ID, MerchantID: d.MerchantID}
}

// String encodes c for a link: base64 (URL alphabet) of the deadline in
// Unix nanoseconds ("" when unknown), the dispute's and the merchant's
// ids. Opaque to operators; never digits alone, so that the console's
// card-number check does not take it for a card.
func (c DisputeCursor) String() string {
	due := ""
	if !c.DueBy.IsZero() {
		due = strconv.FormatInt(c.DueBy.UnixNano(), 10)
	}
	return base64.RawURLEncoding.EncodeToString([]byte(due + "\x00" + c.ID + "\x00" + c.MerchantID))
}

// ParseDisputeCursor reads what DisputeCursor.String wrote: EINVALID on
// "after" for anything else.
func ParseDisputeCursor(s string) (DisputeCursor, error) {
	bad := Invalid("after", "invalid_value", "after is not a cursor of this list (the next page's link sets it)")
	if len(s) > disputeCursorBytesMax {
		return DisputeCursor{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return DisputeCursor{}, bad
	}
	parts := strings.Split(string(b), "\x00")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return DisputeCursor{}, bad
	}
	c := DisputeCursor{ID: parts[1], MerchantID: parts[2]}
	if parts[0] != "" {
		n, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			return DisputeCursor{}, bad
		}
		c.DueBy = time.Unix(0, n).UTC()
	}
	return c, nil
}

// Before reports whether a dispute at c comes before one at d in the
// order of ListDisputes (an unknown deadline last).
func (c DisputeCursor) Before(d DisputeCursor) bool {
	switch {
	case c.DueBy.IsZero() != d.DueBy.IsZero():
		return d.DueBy.IsZero()
	case !c.DueBy.Equal(d.DueBy):
		return c.DueBy.Before(d.DueBy)
	case c.ID != d.ID:
		return c.ID < d.ID
	}
	return c.MerchantID < d.MerchantID
}

// DisputePage is a page of a dispute list.
type DisputePage struct {
	Disputes []*Dispute
	// Next is where the list goes on (the next query's After); "" at its
	// end.
	Next string
}

// DisputeLister is the optional capability of a store that keeps a
// table of disputes, one row a dispute, written with the payment change
// that records it (Write.Disputes), for the operators' console.
type DisputeLister interface {
	// ListDisputes returns a page of the disputes q selects (q is
	// valid), by deadline (DueBy, unknown last), then ID, then merchant:
	// for each status asked, a range of an index of the table, at most
	// q.Limit+1 rows each. One statement.
	ListDisputes(ctx context.Context, q DisputeQuery) (*DisputePage, error)
}

// validateDisputes refuses Write.Disputes without the payment change
// that records them: each is a dispute of w.PaymentUpdate, which a store
// stores first and whose version guards the dispute's row too.
func (w *Write) validateDisputes() error {
	if len(w.Disputes) == 0 {
		return nil
	}
	p := w.PaymentUpdate
	switch {
	case len(w.Disputes) > DisputesPerWriteMax:
		return fmt.Errorf("%w: %d disputes in one Write, at most %d", ErrWriteInvalid, len(w.Disputes), DisputesPerWriteMax)
	case p == nil:
		return fmt.Errorf("%w: disputes without the PaymentUpdate that records them", ErrWriteInvalid)
	}
	for _, d := range w.Disputes {
		if d == nil || d.ID == "" || d.MerchantID != p.MerchantID || d.PaymentID != p.ID {
			return fmt.Errorf("%w: a dispute that is not one of payment %s's", ErrWriteInvalid, p.ID)
		}
	}
	return nil
}
