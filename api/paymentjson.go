package api

import "github.com/surgepay/surgepay/internal/jsonappend"

// appendPaymentJSON appends p as json.Marshal writes it: the fields in
// their order, omitempty as tagged, map keys sorted, strings escaped the
// same way (HTML-safe, invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped). Every sale renders one payment, stored as its idempotent
// answer and sent; reflection took 3 % of the server's CPU at 5,000
// sales/s (bench/RESULTS.md, issue 14 session 20).
// TestPaymentJSONMatchesMarshal holds it to json.Marshal; a field added
// to paymentJSON (or the types it holds) must be added here too, which
// that test catches.
func appendPaymentJSON(b []byte, p *paymentJSON) []byte {
	b = append(b, `{"id":`...)
	b = jsonappend.String(b, p.ID)
	b = append(b, `,"object":`...)
	b = jsonappend.String(b, p.Object)
	b = append(b, `,"status":`...)
	b = jsonappend.String(b, p.Status)
	b = jsonappend.Int(b, `,"amount":`, p.Amount)
	b = jsonappend.Int(b, `,"amount_tax":`, p.AmountTax)
	b = jsonappend.Int(b, `,"amount_total":`, p.AmountTotal)
	b = jsonappend.Int(b, `,"amount_capturable":`, p.AmountCapturable)
	b = jsonappend.Int(b, `,"amount_captured":`, p.AmountCaptured)
	b = jsonappend.Int(b, `,"amount_refunded":`, p.AmountRefunded)
	b = append(b, `,"currency":`...)
	b = jsonappend.String(b, p.Currency)
	b = append(b, `,"capture_method":`...)
	b = jsonappend.String(b, p.CaptureMethod)
	b = append(b, `,"customer":`...)
	b = jsonappend.String(b, p.Customer)
	b = append(b, `,"payment_method":`...)
	b = jsonappend.String(b, p.PaymentMethod)
	b = append(b, `,"description":`...)
	b = jsonappend.String(b, p.Description)
	b = append(b, `,"metadata":`...)
	b = jsonappend.Map(b, p.Metadata)
	b = append(b, `,"tax":`...)
	if t := p.Tax; t == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"country":`...)
		b = jsonappend.String(b, t.Country)
		b = jsonappend.Optional(b, `,"region":`, t.Region)
		b = jsonappend.Optional(b, `,"postal_code":`, t.PostalCode)
		b = jsonappend.Optional(b, `,"category":`, t.Category)
		b = jsonappend.Int(b, `,"rate_bps":`, int64(t.RateBPS))
		b = append(b, '}')
	}
	b = jsonappend.Optional(b, `,"decline_code":`, p.DeclineCode)
	b = jsonappend.Optional(b, `,"failure_message":`, p.FailureMessage)
	b = append(b, `,"transactions":`...)
	if p.Transactions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range p.Transactions {
			t := &p.Transactions[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = jsonappend.String(b, t.ID)
			b = append(b, `,"type":`...)
			b = jsonappend.String(b, t.Type)
			b = append(b, `,"status":`...)
			b = jsonappend.String(b, t.Status)
			b = jsonappend.Int(b, `,"amount":`, t.Amount)
			b = jsonappend.Optional(b, `,"provider_reference":`, t.ProviderReference)
			b = jsonappend.Optional(b, `,"decline_code":`, t.DeclineCode)
			b = jsonappend.Optional(b, `,"message":`, t.Message)
			b = jsonappend.Int(b, `,"created":`, t.Created)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if d := p.Dispute; d != nil {
		b = appendDisputeJSON(append(b, `,"dispute":`...), d)
	}
	if len(p.Disputes) > 0 {
		b = append(b, `,"disputes":[`...)
		for i := range p.Disputes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendDisputeJSON(b, &p.Disputes[i])
		}
		b = append(b, ']')
	}
	b = jsonappend.Optional(b, `,"client_secret":`, p.ClientSecret)
	b = jsonappend.Int(b, `,"created":`, p.Created)
	return append(b, '}')
}

func appendDisputeJSON(b []byte, d *disputeJSON) []byte {
	b = append(b, `{"id":`...)
	b = jsonappend.String(b, d.ID)
	b = append(b, `,"status":`...)
	b = jsonappend.String(b, d.Status)
	b = jsonappend.Int(b, `,"amount":`, d.Amount)
	b = jsonappend.Optional(b, `,"reason":`, d.Reason)
	if d.DueBy != 0 {
		b = jsonappend.Int(b, `,"due_by":`, d.DueBy)
	}
	b = jsonappend.Int(b, `,"created":`, d.Created)
	b = jsonappend.Int(b, `,"updated":`, d.Updated)
	return append(b, '}')
}
