package api

import (
	"github.com/surgepay/surgepay"
)

// The API's JSON representations. Times are Unix seconds; amounts are
// integers in the currency's minor unit.

type customerJSON struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Name        string            `json:"name"`
	Email       string            `json:"email"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	Created     int64             `json:"created"`
}

func customerOf(c *surgepay.Customer) customerJSON {
	return customerJSON{ID: c.ID, Object: "customer", Name: c.Name, Email: c.Email,
		Description: c.Description, Metadata: nonNil(c.Metadata), Created: c.Created.Unix()}
}

type cardJSON struct {
	Brand       string `json:"brand"`
	Last4       string `json:"last4"`
	ExpMonth    int    `json:"exp_month"`
	ExpYear     int    `json:"exp_year"`
	Fingerprint string `json:"fingerprint"`
}

type billingJSON struct {
	Name string `json:"name"`
}

type paymentMethodJSON struct {
	ID             string      `json:"id"`
	Object         string      `json:"object"`
	Type           string      `json:"type"`
	Customer       string      `json:"customer"`
	Card           cardJSON    `json:"card"`
	BillingDetails billingJSON `json:"billing_details"`
	// Processor is the processor a token belongs to; absent for a card in
	// the vault. The token itself is never returned.
	Processor string `json:"processor,omitempty"`
	Created   int64  `json:"created"`
}

func paymentMethodOf(pm *surgepay.PaymentMethod) paymentMethodJSON {
	return paymentMethodJSON{ID: pm.ID, Object: "payment_method", Type: "card", Customer: pm.CustomerID,
		Card:           cardJSON{Brand: pm.Brand, Last4: pm.Last4, ExpMonth: pm.ExpMonth, ExpYear: pm.ExpYear, Fingerprint: pm.Fingerprint},
		BillingDetails: billingJSON{Name: pm.HolderName}, Processor: pm.Processor, Created: pm.Created.Unix()}
}

type taxJSON struct {
	Country    string `json:"country"`
	Region     string `json:"region,omitempty"`
	PostalCode string `json:"postal_code,omitempty"`
	Category   string `json:"category,omitempty"`
	RateBPS    int    `json:"rate_bps"`
}

type transactionJSON struct {
	ID                string `json:"id"`
	Type              string `json:"type"`
	Status            string `json:"status"`
	Amount            int64  `json:"amount"`
	ProviderReference string `json:"provider_reference,omitempty"`
	DeclineCode       string `json:"decline_code,omitempty"`
	Message           string `json:"message,omitempty"`
	Created           int64  `json:"created"`
}

type paymentJSON struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Status           string            `json:"status"`
	Amount           int64             `json:"amount"`
	AmountTax        int64             `json:"amount_tax"`
	AmountTotal      int64             `json:"amount_total"`
	AmountCapturable int64             `json:"amount_capturable"`
	AmountCaptured   int64             `json:"amount_captured"`
	AmountRefunded   int64             `json:"amount_refunded"`
	Currency         string            `json:"currency"`
	CaptureMethod    string            `json:"capture_method"`
	Customer         string            `json:"customer"`
	PaymentMethod    string            `json:"payment_method"`
	Description      string            `json:"description"`
	Metadata         map[string]string `json:"metadata"`
	Tax              *taxJSON          `json:"tax"`
	DeclineCode      string            `json:"decline_code,omitempty"`
	FailureMessage   string            `json:"failure_message,omitempty"`
	Transactions     []transactionJSON `json:"transactions"`
	// Dispute is the last dispute (chargeback) opened on the payment at
	// its processor, as clients that read one dispute know it; absent if
	// none. The payment's status stays as it was.
	Dispute *disputeJSON `json:"dispute,omitempty"`
	// Disputes are all the payment's disputes, oldest first: a second
	// dispute is added beside the first, which may be closed; absent if
	// none.
	Disputes []disputeJSON `json:"disputes,omitempty"`
	// ClientSecret, while the payment awaits a browser's card
	// (requires_payment_method), is what the merchant's server hands its
	// page to confirm it (docs/checkout.md); absent otherwise.
	ClientSecret string `json:"client_secret,omitempty"`
	Created      int64  `json:"created"`
}

type disputeJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Amount int64  `json:"amount"`
	Reason string `json:"reason,omitempty"`
	// DueBy is the deadline of the merchant's response, Unix seconds;
	// absent when the processor gave none.
	DueBy   int64 `json:"due_by,omitempty"`
	Created int64 `json:"created"`
	Updated int64 `json:"updated"`
}

func paymentOf(p *surgepay.Payment) paymentJSON {
	out := paymentJSON{ID: p.ID, Object: "payment", Status: string(p.Status), Amount: p.Amount,
		AmountTax: p.AmountTax, AmountTotal: p.AmountTotal(), AmountCapturable: p.AmountCapturable(),
		AmountCaptured: p.AmountCaptured, AmountRefunded: p.AmountRefunded, Currency: p.Currency,
		CaptureMethod: p.CaptureMethod, Customer: p.CustomerID, PaymentMethod: p.PaymentMethodID,
		Description: p.Description, Metadata: nonNil(p.Metadata), DeclineCode: p.DeclineCode,
		FailureMessage: p.FailureMessage, Transactions: make([]transactionJSON, 0, len(p.Transactions)),
		ClientSecret: p.ClientSecret, Created: p.Created.Unix()}
	if p.Tax != nil {
		out.Tax = &taxJSON{Country: p.Tax.Country, Region: p.Tax.Region, PostalCode: p.Tax.PostalCode,
			Category: p.Tax.Category, RateBPS: p.Tax.RateBPS}
	}
	for _, t := range p.Transactions {
		out.Transactions = append(out.Transactions, transactionJSON{ID: t.ID, Type: t.Type, Status: t.Status,
			Amount: t.Amount, ProviderReference: t.ProviderRef, DeclineCode: t.DeclineCode, Message: t.Message,
			Created: t.Created.Unix()})
	}
	if ds := p.Disputes(); len(ds) > 0 {
		out.Disputes = make([]disputeJSON, len(ds))
		for i, d := range ds {
			out.Disputes[i] = disputeJSON{ID: d.ID, Status: d.Status, Amount: d.Amount, Reason: d.Reason,
				Created: d.Created.Unix(), Updated: d.Updated.Unix()}
			if !d.DueBy.IsZero() {
				out.Disputes[i].DueBy = d.DueBy.Unix()
			}
		}
		out.Dispute = &out.Disputes[len(ds)-1]
	}
	return out
}

type eventJSON struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	Payment    string `json:"payment"`
	Type       string `json:"type"`
	FromStatus string `json:"from_status"`
	ToStatus   string `json:"to_status"`
	Amount     int64  `json:"amount"`
	Actor      string `json:"actor"`
	RequestID  string `json:"request_id"`
	Created    int64  `json:"created"`
}

func eventOf(e *surgepay.Event) eventJSON {
	return eventJSON{ID: e.ID, Object: "event", Payment: e.PaymentID, Type: e.Type, FromStatus: string(e.FromStatus),
		ToStatus: string(e.ToStatus), Amount: e.Amount, Actor: e.ActorKeyID, RequestID: e.RequestID, Created: e.Created.Unix()}
}

type deletedJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

type listJSON struct {
	Object  string `json:"object"`
	Data    []any  `json:"data"`
	HasMore bool   `json:"has_more"`
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Request bodies.

type customerRequest struct {
	Name        *string           `json:"name"`
	Email       *string           `json:"email"`
	Description *string           `json:"description"`
	Metadata    map[string]string `json:"metadata"`
}

type cardRequest struct {
	Number   string `json:"number"`
	ExpMonth int    `json:"exp_month"`
	ExpYear  int    `json:"exp_year"`
	CVC      string `json:"cvc"`
}

type paymentMethodRequest struct {
	Customer       string                 `json:"customer"`
	Type           string                 `json:"type"`
	Card           *cardRequest           `json:"card"`
	ProcessorToken *processorTokenRequest `json:"processor_token"`
	BillingDetails *billingJSON           `json:"billing_details"`
}

// processorTokenRequest is a processor's own payment method token.
type processorTokenRequest struct {
	Processor string `json:"processor"`
	Token     string `json:"token"`
}

type taxRequest struct {
	Country    string `json:"country"`
	Region     string `json:"region"`
	PostalCode string `json:"postal_code"`
	Category   string `json:"category"`
}

type paymentRequest struct {
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Customer      string            `json:"customer"`
	PaymentMethod string            `json:"payment_method"`
	CaptureMethod string            `json:"capture_method"`
	Description   string            `json:"description"`
	Metadata      map[string]string `json:"metadata"`
	Tax           *taxRequest       `json:"tax"`
	CVC           string            `json:"cvc"`
}

type amountRequest struct {
	Amount *int64 `json:"amount"` // nil: the whole amount
}
