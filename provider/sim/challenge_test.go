package sim_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/sim"
)

const returnURL = "https://shop.example/checkout/return?payment=pay_1&token=abc"

// browserReq is authReq for a browser's payment, which can authenticate
// the cardholder: it carries a ReturnURL.
func browserReq(key, number string, amount int64, capture bool, ret string) *surgepay.AuthorizeRequest {
	req := authReq(key, number, amount, capture)
	req.ReturnURL = ret
	return req
}

// challengeID returns the last element of an ActionURL.
func challengeID(t *testing.T, actionURL string) string {
	t.Helper()
	i := strings.LastIndex(actionURL, "/3ds/")
	if i < 0 {
		t.Fatalf("action URL %q names no challenge", actionURL)
	}
	return actionURL[i+len("/3ds/"):]
}

func TestThreeDSCardsAreLuhnValid(t *testing.T) {
	for _, n := range []string{sim.Card3DSChallenge, sim.Card3DSChallengeDeclined, sim.Card3DSFrictionless,
		sim.Card3DSNotEnrolled, sim.Card3DSUnavailable} {
		if !surgepay.Luhn(n) {
			t.Errorf("%s: fails Luhn", n)
		}
	}
}

// TestThreeDSCards checks what each 3-D Secure test card answers at
// once, for a browser's payment (with a ReturnURL) and a server's
// (without), in process and over HTTP (ReturnURL, RequiresAction and
// ActionURL cross the wire).
func TestThreeDSCards(t *testing.T) {
	const action = "https://shop.example" + surgepay.PagesPrefix + "3ds/"
	for _, tc := range []struct {
		name, number string
		browser      bool
		requires     bool
		approved     bool
		decline      string
	}{
		{"ChallengeBrowser", sim.Card3DSChallenge, true, true, false, ""},
		{"ChallengeServer", sim.Card3DSChallenge, false, false, false, surgepay.DeclineAuthenticationRequired},
		{"ChallengeDeclinedBrowser", sim.Card3DSChallengeDeclined, true, true, false, ""},
		{"ChallengeDeclinedServer", sim.Card3DSChallengeDeclined, false, false, false, surgepay.DeclineAuthenticationRequired},
		{"FrictionlessBrowser", sim.Card3DSFrictionless, true, false, true, ""},
		{"FrictionlessServer", sim.Card3DSFrictionless, false, false, true, ""},
		{"NotEnrolledBrowser", sim.Card3DSNotEnrolled, true, false, true, ""},
		{"NotEnrolledServer", sim.Card3DSNotEnrolled, false, false, true, ""},
		{"UnavailableBrowser", sim.Card3DSUnavailable, true, false, false, surgepay.DeclineAuthenticationUnavailable},
		{"UnavailableServer", sim.Card3DSUnavailable, false, false, false, surgepay.DeclineAuthenticationUnavailable},
		{"OrdinaryBrowser", visa, true, false, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
				ret := ""
				if tc.browser {
					ret = returnURL
				}
				res, err := c.Authorize(t.Context(), browserReq("k", tc.number, 1000, true, ret))
				if err != nil {
					t.Fatalf("authorize: %v", err)
				}
				if res.RequiresAction != tc.requires || res.Approved != tc.approved || res.DeclineCode != tc.decline {
					t.Fatalf("got %+v; want requires_action %v, approved %v, decline %q", res, tc.requires, tc.approved, tc.decline)
				}
				if tc.requires != strings.HasPrefix(res.ActionURL, action) {
					t.Fatalf("action URL %q: want one under %s only when action is required", res.ActionURL, action)
				}
				if strings.Contains(res.Message, tc.number) {
					t.Fatalf("message %q carries the card number", res.Message)
				}
				want := sim.Effects{}
				switch {
				case tc.approved:
					want = sim.Effects{Authorizations: 1, Captures: 1, AmountAuthorized: 1000, AmountCaptured: 1000, Currency: "usd"}
				case tc.decline != "":
					want.AuthorizationsDeclined = 1
				}
				if diff := cmp.Diff(want, p.Effects("pay_k")); diff != "" {
					t.Errorf("effects (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestChallengePendingReplayAndLookup: while the challenge waits, a replay
// and Lookup answer the same RequiresAction, other parameters are refused
// as a reused key, and nothing is counted.
func TestChallengePendingReplayAndLookup(t *testing.T) {
	providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		ctx := t.Context()
		first, err := c.Authorize(ctx, browserReq("k", sim.Card3DSChallenge, 1000, false, returnURL))
		if err != nil || !first.RequiresAction || first.Approved || !strings.HasPrefix(first.Reference, "3ds_") ||
			first.PaymentID != "pay_k" || first.Operation != surgepay.TxAuthorization || first.Amount != 1000 {
			t.Fatalf("authorize: got %+v, %v; want RequiresAction for pay_k, with the challenge's reference", first, err)
		}
		if id := challengeID(t, first.ActionURL); len(id) != 32 || !p.HasChallenge(id) {
			t.Fatalf("challenge ID %q: want 32 characters, held", id)
		}
		// A retry after a crash makes a new payment ID: the first is answered.
		retry := browserReq("k", sim.Card3DSChallenge, 1000, false, returnURL)
		retry.PaymentID = "pay_other"
		again, err := c.Authorize(ctx, retry)
		if err != nil || !cmp.Equal(first, again) {
			t.Fatalf("replay: got %+v, %v; want %+v", again, err, first)
		}
		got, err := c.Lookup(ctx, "k")
		if err != nil || !cmp.Equal(first, got) {
			t.Fatalf("lookup: got %+v, %v; want %+v", got, err, first)
		}
		_, err = c.Authorize(ctx, browserReq("k", sim.Card3DSChallenge, 1200, false, returnURL))
		wantProviderError(t, "replay with another amount", err, surgepay.NotPerformed, sim.ErrKeyReused)
		_, err = c.Authorize(ctx, browserReq("k", visa, 1000, false, returnURL))
		wantProviderError(t, "replay with another card", err, surgepay.NotPerformed, sim.ErrKeyReused)
		if e := p.Effects("pay_k"); e != (sim.Effects{}) {
			t.Errorf("effects while pending: got %+v, want none", e)
		}
		if tot := p.TotalEffects(); tot.Authorizations != 0 || tot.AuthorizationsDeclined != 0 || tot.Records != 0 {
			t.Errorf("totals while pending: got %+v, want nothing", tot)
		}
	})
}

// TestChallengeAnswerLost: amount 9102 on a challenge card loses the
// RequiresAction answer; Lookup finds the challenge.
func TestChallengeAnswerLost(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	_, err := p.Authorize(t.Context(), browserReq("k", sim.Card3DSChallenge, sim.AmountUnknown, false, returnURL))
	wantProviderError(t, "authorize 9102", err, surgepay.Unknown, sim.ErrAnswerLost)
	res, err := p.Lookup(t.Context(), "k")
	if err != nil || !res.RequiresAction || res.ActionURL == "" {
		t.Fatalf("lookup: got %+v, %v; want RequiresAction", res, err)
	}
}

func TestChallengeReturnURLInvalid(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	for i, u := range []string{"/relative", "ftp://shop.example/x", "https://", "https://a;b/x",
		"https://shop.example/" + strings.Repeat("a", surgepay.ReturnURLBytesMax)} {
		key := fmt.Sprintf("k%d", i)
		res, err := p.Authorize(t.Context(), browserReq(key, sim.Card3DSChallenge, 1000, false, u))
		if err != nil || res.RequiresAction || res.DeclineCode != sim.DeclineInvalidRequest || strings.Contains(res.Message, u) {
			t.Errorf("return URL %.40q: got %+v, %v; want declined invalid_request, the URL not echoed", u, res, err)
		}
	}
}

// TestChallengeActionURL: the pages' URL is PagesURL when set, else the
// ReturnURL's origin.
func TestChallengeActionURL(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	res, err := p.Authorize(t.Context(), browserReq("a", sim.Card3DSChallenge, 1000, false, "http://127.0.0.1:8080/r?x=1"))
	if err != nil || !strings.HasPrefix(res.ActionURL, "http://127.0.0.1:8080/simulator/v1/3ds/") {
		t.Fatalf("without pages_url: got %+v, %v", res, err)
	}
	cfg := p.Config()
	cfg.PagesURL = "http://127.0.0.1:8181/"
	if err := p.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	res, err = p.Authorize(t.Context(), browserReq("b", sim.Card3DSChallenge, 1000, false, "http://127.0.0.1:8080/r?x=1"))
	if err != nil || !strings.HasPrefix(res.ActionURL, "http://127.0.0.1:8181/simulator/v1/3ds/") {
		t.Fatalf("with pages_url: got %+v, %v", res, err)
	}
}

// TestChallengeAbandoned: a challenge not completed within ChallengeTTL
// is declined authentication_failed on its next Lookup or replay, and
// counted then; a completion after that changes nothing.
func TestChallengeAbandoned(t *testing.T) {
	providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		clock := newFakeClock(p)
		ctx := t.Context()
		first, err := c.Authorize(ctx, browserReq("k", sim.Card3DSChallenge, 1000, true, returnURL))
		if err != nil || !first.RequiresAction {
			t.Fatalf("authorize: %+v, %v", first, err)
		}
		clock.advance(sim.ChallengeTTLDefault - time.Second)
		if got, err := c.Lookup(ctx, "k"); err != nil || !got.RequiresAction {
			t.Fatalf("lookup within the TTL: got %+v, %v; want RequiresAction", got, err)
		}
		clock.advance(time.Second)
		got, err := c.Lookup(ctx, "k")
		if err != nil || got.RequiresAction || got.Approved || got.DeclineCode != surgepay.DeclineAuthenticationFailed ||
			got.Reference == "" || got.PaymentID != "pay_k" {
			t.Fatalf("lookup after the TTL: got %+v, %v; want declined authentication_failed", got, err)
		}
		again, err := c.Authorize(ctx, browserReq("k", sim.Card3DSChallenge, 1000, true, returnURL))
		if err != nil || !cmp.Equal(got, again) {
			t.Fatalf("replay after the TTL: got %+v, %v; want %+v", again, err, got)
		}
		if e := p.Effects("pay_k"); e != (sim.Effects{AuthorizationsDeclined: 1}) {
			t.Errorf("effects: got %+v, want one declined authorization", e)
		}
		// The page still knows it, and a late completion does nothing.
		v, err := sim.CompleteChallenge(p, challengeID(t, first.ActionURL), true)
		if err != nil || v != "abandoned" {
			t.Fatalf("late completion: got %q, %v; want abandoned", v, err)
		}
		if got2, err := c.Lookup(ctx, "k"); err != nil || !cmp.Equal(got, got2) {
			t.Fatalf("lookup after a late completion: got %+v, %v; want %+v", got2, err, got)
		}
	})
}

// TestChallengeCancelled: a Void of a pending challenge's reference
// cancels it, as Stripe cancels a PaymentIntent awaiting authentication:
// the Void is approved, the authorization under the challenge's key is
// declined authentication_failed, and the page can no longer complete it.
// A challenge that has ended, or one not held, declines the Void.
func TestChallengeCancelled(t *testing.T) {
	providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		ctx := t.Context()
		first, err := c.Authorize(ctx, browserReq("k", sim.Card3DSChallenge, 1000, true, returnURL))
		if err != nil || !first.RequiresAction {
			t.Fatalf("authorize: %+v, %v", first, err)
		}
		void := &surgepay.VoidRequest{IdempotencyKey: "k/abandon", AuthorizationRef: first.Reference}
		v, err := c.Void(ctx, void)
		if err != nil || !v.Approved || v.Operation != surgepay.TxVoid || v.Amount != 1000 {
			t.Fatalf("void of the pending challenge: got %+v, %v; want approved", v, err)
		}
		if again, err := c.Void(ctx, void); err != nil || !cmp.Equal(v, again) {
			t.Fatalf("void replayed: got %+v, %v; want %+v", again, err, v)
		}
		got, err := c.Lookup(ctx, "k")
		if err != nil || got.RequiresAction || got.Approved || got.DeclineCode != surgepay.DeclineAuthenticationFailed ||
			!strings.Contains(got.Message, "cancelled") {
			t.Fatalf("lookup after the cancel: got %+v, %v; want declined authentication_failed", got, err)
		}
		if state, err := sim.CompleteChallenge(p, challengeID(t, first.ActionURL), true); err != nil || state != "cancelled" {
			t.Fatalf("authenticating after the cancel: %q, %v; want it left cancelled", state, err)
		}
		if e := p.Effects("pay_k"); e != (sim.Effects{AuthorizationsDeclined: 1}) {
			t.Errorf("effects: got %+v, want one declined authorization, nothing authorized", e)
		}

		// Authenticated before the cancel: the Void is declined, and the
		// sale stands.
		ended, err := c.Authorize(ctx, browserReq("k2", sim.Card3DSChallenge, 1000, true, returnURL))
		if err != nil || !ended.RequiresAction {
			t.Fatalf("authorize: %+v, %v", ended, err)
		}
		if _, err := sim.CompleteChallenge(p, challengeID(t, ended.ActionURL), true); err != nil {
			t.Fatal(err)
		}
		if v, err := c.Void(ctx, &surgepay.VoidRequest{IdempotencyKey: "k2/abandon", AuthorizationRef: ended.Reference}); err != nil || v.Approved {
			t.Fatalf("void of an ended challenge: got %+v, %v; want declined", v, err)
		}
		if got, err := c.Lookup(ctx, "k2"); err != nil || !got.Approved || !got.Captured {
			t.Fatalf("lookup of the authenticated sale: got %+v, %v; want it approved and captured", got, err)
		}
		if e := p.Effects("pay_k2"); e.Authorizations != 1 || e.AmountCaptured != 1000 {
			t.Errorf("effects of the authenticated sale: %+v", e)
		}
		unknown := strings.TrimSuffix(first.Reference, challengeID(t, first.ActionURL)) + strings.Repeat("a", 32)
		if v, err := c.Void(ctx, &surgepay.VoidRequest{IdempotencyKey: "k3", AuthorizationRef: unknown}); err != nil || v.Approved {
			t.Fatalf("void of a challenge not held: got %+v, %v; want declined", v, err)
		}
	})
}

// TestChallengeAbandonedUnasked: an abandoned challenge nobody looked up
// is declined when TotalEffects sweeps it, and its page is released after
// two TTLs.
func TestChallengeAbandonedUnasked(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	clock := newFakeClock(p)
	res, err := p.Authorize(t.Context(), browserReq("k", sim.Card3DSChallenge, 1000, false, returnURL))
	if err != nil || !res.RequiresAction {
		t.Fatalf("authorize: %+v, %v", res, err)
	}
	id := challengeID(t, res.ActionURL)
	clock.advance(sim.ChallengeTTLDefault)
	if tot := p.TotalEffects(); tot.AuthorizationsDeclined != 1 || tot.Records != 1 {
		t.Fatalf("totals after the TTL: got %+v; want the abandoned authorization declined", tot)
	}
	if !p.HasChallenge(id) {
		t.Fatal("challenge released after one TTL; want it held for its page")
	}
	clock.advance(sim.ChallengeTTLDefault)
	p.TotalEffects()
	if p.HasChallenge(id) {
		t.Fatal("challenge held after two TTLs; want it released")
	}
	if got, err := p.Lookup(t.Context(), "k"); err != nil || got.DeclineCode != surgepay.DeclineAuthenticationFailed {
		t.Fatalf("lookup: got %+v, %v; want the record, declined authentication_failed", got, err)
	}
}

// TestChallengesBounded: beyond its bound the simulator declines new
// challenges authentication_unavailable, and releases old ones.
func TestChallengesBounded(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	clock := newFakeClock(p)
	p.SetChallengesMax(sim.ShardCount) // one a shard.
	start := func(round string) (pending, unavailable int) {
		for i := range 1000 { // enough keys that every shard gets one, deterministically.
			res, err := p.Authorize(t.Context(), browserReq(fmt.Sprintf("%s-%d", round, i), sim.Card3DSChallenge, 1000, false, returnURL))
			switch {
			case err != nil:
				t.Fatalf("authorize: %v", err)
			case res.RequiresAction:
				pending++
			case res.DeclineCode == surgepay.DeclineAuthenticationUnavailable:
				unavailable++
			default:
				t.Fatalf("authorize: got %+v; want RequiresAction or authentication_unavailable", res)
			}
		}
		return pending, unavailable
	}
	if pending, unavailable := start("a"); pending != sim.ShardCount || unavailable != 1000-sim.ShardCount {
		t.Fatalf("round a: %d pending, %d unavailable; want %d pending", pending, unavailable, sim.ShardCount)
	}
	clock.advance(2 * sim.ChallengeTTLDefault)
	if pending, _ := start("b"); pending != sim.ShardCount {
		t.Fatalf("round b, after the first were released: %d pending; want %d", pending, sim.ShardCount)
	}
	abandoned := 0
	for i := range 1000 {
		if res, err := p.Lookup(t.Context(), fmt.Sprintf("a-%d", i)); err == nil && res.DeclineCode == surgepay.DeclineAuthenticationFailed {
			abandoned++
		}
	}
	if abandoned != sim.ShardCount {
		t.Fatalf("round a: %d abandoned; want %d", abandoned, sim.ShardCount)
	}
}

// TestResetForgetsChallenges: Reset forgets pending challenges too.
func TestResetForgetsChallenges(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	res, err := p.Authorize(t.Context(), browserReq("k", sim.Card3DSChallenge, 1000, false, returnURL))
	if err != nil || !res.RequiresAction {
		t.Fatalf("authorize: %+v, %v", res, err)
	}
	p.Reset()
	if p.HasChallenge(challengeID(t, res.ActionURL)) {
		t.Fatal("challenge held after Reset")
	}
	_, err = p.Lookup(t.Context(), "k")
	wantProviderError(t, "lookup after reset", err, surgepay.NotPerformed, sim.ErrNoSuchOperation)
}

func TestConfigPagesURLAndChallengeTTL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ttl time.Duration
		ok  bool
	}{
		{"", 0, true},
		{"http://127.0.0.1:8181", time.Minute, true},
		{"https://sim.example/base/", sim.ChallengeTTLMin, true},
		{"ftp://sim.example", 0, false},
		{"http://sim.example/?q=1", 0, false},
		{"http://user@sim.example", 0, false},
		{"/relative", 0, false},
		{"http://a;b", 0, false},
		{"", time.Second, false},
		{"", sim.ChallengeTTLMax + time.Second, false},
	} {
		cfg := sim.DefaultConfig()
		cfg.PagesURL, cfg.ChallengeTTL = tc.url, sim.Duration(tc.ttl)
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("pages_url %q, challenge_ttl %s: got %v, want ok %v", tc.url, tc.ttl, err, tc.ok)
		}
	}
}
