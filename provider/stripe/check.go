package stripe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	stripego "github.com/stripe/stripe-go/v82"
)

// Check verifies the account's credentials with a harmless read: it
// lists at most one PaymentIntent (GET /v1/payment_intents?limit=1), the
// object the connector needs and a restricted key must be able to read.
// It changes nothing at Stripe and is not retried. The error, if any,
// says what is wrong in an operator's words (CheckProblem).
func (p *Provider) Check(ctx context.Context) error {
	params := &stripego.PaymentIntentListParams{}
	params.Limit = stripego.Int64(1)
	params.Single = true // one page: the first answer tells all
	params.Context = ctx
	for _, err := range p.c.V1PaymentIntents.List(ctx, params) {
		if err != nil {
			return redact(err)
		}
		break
	}
	return nil
}

// Mode is the key's mode by its prefix: "test", "live", or "" for a key
// whose prefix is not Stripe's (a double's).
func (p *Provider) Mode() string {
	switch k := p.cfg.SecretKey; {
	case strings.HasPrefix(k, "sk_test_"), strings.HasPrefix(k, "rk_test_"):
		return "test"
	case strings.HasPrefix(k, "sk_live_"), strings.HasPrefix(k, "rk_live_"):
		return "live"
	}
	return ""
}

// CheckProblem says what an error of Check (or of any call) means for an
// operator: the processor's status, code and message, and what to do.
// It never includes the key.
func CheckProblem(err error) string {
	var ce *CallError
	if errors.As(err, &ce) {
		what := fmt.Sprintf("%d %s", ce.Status, strings.TrimSpace(ce.Type+" "+ce.Code))
		switch ce.Status {
		case 401:
			return fmt.Sprintf("authentication failed (%s: %s): the key is wrong or revoked", what, ce.Message)
		case 403:
			return fmt.Sprintf("permission denied (%s: %s): the key may not read PaymentIntents (a restricted key needs PaymentIntents access), or a test key is used against live data", what, ce.Message)
		case 429:
			return fmt.Sprintf("rate limited (%s: %s): the account's call budget is spent; lower calls_per_second", what, ce.Message)
		}
		return fmt.Sprintf("the processor answered %s: %s (request %s)", what, ce.Message, ce.RequestID)
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("unreachable: connection refused (is base_url right?): %v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("unreachable: no answer within the timeout: %v", err)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Sprintf("unreachable: the name does not resolve: %v", err)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Sprintf("unreachable: %v", err)
	}
	return err.Error()
}
