package sim

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
)

// AmountDisputed: a sale of this amount succeeds, and then the cardholder
// disputes it: the simulator files a dispute (needs_response, fraudulent,
// due DisputeResponseWindow after it is filed) and sends its webhook to the function set by OnEvent, as a processor
// would, so that the dispute path is testable offline.
const AmountDisputed int64 = 9105

// Dispute webhooks: how long after the sale, how often and how many times
// a delivery is tried while its payment is not stored yet.
const (
	DisputeDelay       = 50 * time.Millisecond
	DisputeRetryEvery  = 100 * time.Millisecond
	DisputeAttemptsMax = 50
)

// disputeReason is the cardholder's reason the simulator gives (Stripe's
// code for an unrecognised charge).
const disputeReason = "fraudulent"

// DisputeResponseWindow is how long after filing a dispute the simulator
// gives the merchant to respond (its event's due_by): Stripe's disputes
// typically allow 7 to 21 days, set by the card network; the simulator
// takes the shortest, so that a test sees the nearest deadline.
const DisputeResponseWindow = 7 * 24 * time.Hour

// SignatureHeader carries the simulator's webhook signature: the hex
// HMAC-SHA256 of the body under its webhook secret.
const SignatureHeader = "Surgepay-Sim-Signature"

// EventSink receives the simulator's webhooks; it reports whether the
// delivery should be tried again (the payment is not stored yet, or the
// receiver failed).
type EventSink func(ctx context.Context, payload []byte, header http.Header) (retry bool)

// simEvent is the body of a simulator webhook.
type simEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Merchant  string `json:"merchant"`
	Payment   string `json:"payment"`
	Reference string `json:"reference"`
	Dispute   string `json:"dispute"`
	Amount    int64  `json:"amount"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	// DueBy is the deadline of the merchant's response, Unix seconds as
	// Stripe's evidence_details.due_by; 0: none.
	DueBy int64 `json:"due_by,omitempty"`
}

type events struct {
	sink   atomic.Pointer[EventSink]
	secret []byte
	seq    atomic.Uint64
}

func newEvents() *events {
	e := &events{secret: make([]byte, 32)}
	rand.Read(e.secret)
	return e
}

// OnEvent sets where the simulator sends its webhooks; nil: nowhere (the
// dispute is still filed, and nothing is told). Safe for concurrent use.
func (p *Provider) OnEvent(sink EventSink) {
	if sink == nil {
		p.events.sink.Store(nil)
		return
	}
	p.events.sink.Store(&sink)
}

// fileDispute sends the dispute of a sale to the sink, after DisputeDelay,
// retried while the sink asks to, at most DisputeAttemptsMax times. It
// never blocks the call that made the sale.
func (p *Provider) fileDispute(merchantID, paymentID, ref string, amount int64) {
	sp := p.events.sink.Load()
	if sp == nil {
		return
	}
	n := p.events.seq.Add(1)
	body, _ := json.Marshal(simEvent{ID: fmt.Sprintf("evt_sim_%s_%d", p.instance, n), Type: surgepay.ProcessorEventDisputeCreated,
		Merchant: merchantID, Payment: paymentID, Reference: ref, Dispute: fmt.Sprintf("dp_sim_%s_%d", p.instance, n),
		Amount: amount, Status: "needs_response", Reason: disputeReason,
		DueBy: time.Now().Add(DisputeResponseWindow).Unix()})
	header := http.Header{SignatureHeader: {p.sign(body)}, "Content-Type": {"application/json"}}
	go func() {
		time.Sleep(DisputeDelay)
		for range DisputeAttemptsMax {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			retry := (*sp)(ctx, body, header)
			cancel()
			if !retry {
				return
			}
			time.Sleep(DisputeRetryEvery)
		}
	}()
}

func (p *Provider) sign(body []byte) string {
	m := hmac.New(sha256.New, p.events.secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

var _ surgepay.EventParser = (*Provider)(nil)

// ParseEvent verifies and reads one of this simulator's webhooks: a
// signature made with another simulator's secret (or none) is EINVALID.
func (p *Provider) ParseEvent(_ string, payload []byte, header http.Header) (*surgepay.ProcessorEvent, error) {
	got, err := hex.DecodeString(header.Get(SignatureHeader))
	if err != nil || !hmac.Equal(got, mustHex(p.sign(payload))) {
		return nil, surgepay.Invalid(SignatureHeader, "invalid_signature", "the simulator's webhook signature does not verify")
	}
	var ev simEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, surgepay.Invalid("body", "invalid_json", "the simulator's event is not JSON: %v", err)
	}
	out := &surgepay.ProcessorEvent{ID: ev.ID, Kind: ev.Type, PaymentRef: ev.Reference, MerchantID: ev.Merchant,
		PaymentID: ev.Payment, DisputeID: ev.Dispute, Amount: ev.Amount, Status: ev.Status, Reason: ev.Reason}
	if ev.DueBy > 0 {
		out.DueBy = time.Unix(ev.DueBy, 0).UTC()
	}
	return out, nil
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}
