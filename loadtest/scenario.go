package loadtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// reqType is a request type: the unit of per-type statistics.
type reqType int

const (
	typeCustomerCreate reqType = iota
	typeCustomerGet
	typeCustomerUpdate
	typeCustomerList
	typeCustomerDelete
	typePaymentMethodCreate
	typePaymentCreate
	typePaymentAuthorize
	typePaymentCapture
	typePaymentRefund
	typePaymentGet
	typeGet
	typePaymentCreateAwaiting
	typeCheckoutPaymentMethod
	typeCheckoutConfirm
	requestTypeCount
)

// requestTypeNames are the names used in results and thresholds.
// payment.create is a sale (capture_method=automatic); payment.authorize is
// capture_method=manual. payment.create_awaiting is a payment made without a
// card for the browser (requires_payment_method and a client secret);
// checkout.payment_method and checkout.confirm are the card frame's calls
// with the publishable key, and a confirm that succeeds is a sale.
var requestTypeNames = [requestTypeCount]string{
	"customer.create", "customer.get", "customer.update", "customer.list", "customer.delete",
	"payment_method.create", "payment.create", "payment.authorize", "payment.capture",
	"payment.refund", "payment.get", "get",
	"payment.create_awaiting", "checkout.payment_method", "checkout.confirm",
}

// saleTypes are the request types whose answers without error are sales
// (a decline is an answer without error).
var saleTypes = []reqType{typePaymentCreate, typeCheckoutConfirm}

// scenario is a named sequence of API calls.
type scenario struct {
	name string
	// types lists the request types the scenario may send.
	types []reqType
	// pool says the scenario needs set-up customers with saved cards.
	pool bool
	// publishable says the scenario sends calls with the publishable key
	// (Config.PublishableKey) as well as the secret one.
	publishable bool
	run         func(it *iteration)
}

// scenarioTable lists the built-in scenarios; a scenario's index is its ID
// in the recorder.
var scenarioTable = []scenario{
	{"checkout", []reqType{typeCustomerCreate, typePaymentMethodCreate, typePaymentCreate}, false, false, runCheckout},
	{"returning", []reqType{typePaymentAuthorize, typePaymentCapture}, true, false, runReturning},
	{"streamlined", []reqType{typePaymentCreate}, true, false, runStreamlined},
	{"refund", []reqType{typePaymentCreate, typePaymentRefund}, true, false, runRefund},
	{"crud", []reqType{typeCustomerCreate, typeCustomerGet, typeCustomerUpdate, typeCustomerList, typeCustomerDelete}, true, false, runCRUD},
	{"get", []reqType{typeGet}, false, false, runGet},
	{"browser", []reqType{typePaymentCreateAwaiting, typeCheckoutPaymentMethod, typeCheckoutConfirm}, false, true, runBrowser},
}

func scenarioByName(name string) (scenario, bool) {
	i := scenarioIndex(name)
	if i < 0 {
		return scenario{}, false
	}
	return scenarioTable[i], true
}

func scenarioIndex(name string) int {
	return slices.IndexFunc(scenarioTable, func(s scenario) bool { return s.name == name })
}

func scenarioNames() string {
	names := make([]string, len(scenarioTable))
	for i, s := range scenarioTable {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// mixFile is the TOML scenario mix:
//
//	[[scenario]]
//	name = "returning"
//	weight = 70
type mixFile struct {
	Scenario []MixEntry `toml:"scenario"`
}

// ParseMix reads a TOML scenario mix.
func ParseMix(r io.Reader) ([]MixEntry, error) {
	var f mixFile
	md, err := toml.NewDecoder(io.LimitReader(r, ScenarioFileBytesMax)).Decode(&f)
	if err != nil {
		return nil, fmt.Errorf("scenario file: %w", err)
	}
	if keys := md.Undecoded(); len(keys) > 0 {
		return nil, fmt.Errorf("scenario file: unknown key %q", keys[0].String())
	}
	return f.Scenario, validateMix(f.Scenario)
}

func validateMix(mix []MixEntry) error {
	if len(mix) == 0 || len(mix) > ScenarioMixCountMax {
		return fmt.Errorf("mix has %d scenarios, want 1..%d", len(mix), ScenarioMixCountMax)
	}
	seen := map[string]bool{}
	for _, m := range mix {
		if _, ok := scenarioByName(m.Name); !ok {
			return fmt.Errorf("scenario %q: want one of %s", m.Name, scenarioNames())
		}
		if m.Weight <= 0 || m.Weight > 1_000_000 {
			return fmt.Errorf("scenario %q: weight %d, want 1..1000000", m.Name, m.Weight)
		}
		if seen[m.Name] {
			return fmt.Errorf("scenario %q listed twice", m.Name)
		}
		seen[m.Name] = true
	}
	return nil
}

// picker chooses a scenario of the mix by weight. Safe for concurrent use
// (read-only).
type picker struct {
	index  []int // scenario table index per mix entry
	cumul  []int // cumulative weights
	weight int
}

func newPicker(mix []MixEntry) picker {
	var p picker
	for _, m := range mix {
		p.weight += m.Weight
		p.index = append(p.index, scenarioIndex(m.Name))
		p.cumul = append(p.cumul, p.weight)
	}
	return p
}

func (p picker) pick(rng *rand.Rand) int {
	if len(p.index) == 1 {
		return p.index[0]
	}
	w := rng.IntN(p.weight)
	i, _ := slices.BinarySearch(p.cumul, w+1)
	return p.index[i]
}

// env is what every iteration of a run shares. Read-only during the run.
type env struct {
	cl          *client
	rec         *Recorder // nil during set-up: nothing is counted
	pool        *pool
	runID       string
	declineRate float64
	declineCard testCard
	path        string
}

// iteration is one run of one scenario. Owned by its goroutine.
type iteration struct {
	ctx     context.Context
	env     *env
	rng     *rand.Rand
	index   int64
	stage   int
	next    time.Time // intended start of the next request
	started bool
	failed  bool
	reply   apiReply
	// lastCode is the error code of the last failed call, for set-up errors.
	lastCode string
}

// do sends c, records it, and returns its outcome. The corrected latency of
// the request is measured from it.next: the iteration's intended start for
// the first request, the previous request's end afterwards.
func (it *iteration) do(c *call) (*apiReply, outcome) {
	sendAt := time.Now()
	if !it.started {
		it.started = true
		if it.env.rec != nil {
			it.env.rec.iterationStarted(sendAt.Sub(it.next))
		}
	}
	status, transport, recv := it.env.cl.send(it.ctx, c, &it.reply)
	end := time.Now()
	oc, code := classify(c, status, transport, &it.reply)
	check := ""
	if oc == outcomeOK && c.check != nil {
		if check = c.check(&it.reply); check != "" {
			oc, code = outcomeFailed, "check_failed"
			check = requestTypeNames[c.typ] + ": " + check
		}
	}
	if it.env.rec != nil {
		it.env.rec.recordCall(&callSample{
			typ: c.typ, stage: it.stage, corrected: end.Sub(it.next), service: end.Sub(sendAt),
			status: status, code: code, check: check, outcome: oc, sent: int64(len(c.body)), recv: recv,
		})
	}
	it.next = end
	if oc == outcomeFailed {
		it.failed, it.lastCode = true, code
	}
	return &it.reply, oc
}
