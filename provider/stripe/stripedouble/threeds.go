package stripedouble

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// 3-D Secure by redirect, which localstripe lacks: it refuses a
// PaymentIntent's return_url, and asks for authentication with
// next_action use_stripe_sdk (Stripe.js's own flow) where Stripe, given a
// return_url, answers redirect_to_url. The proxy keeps the return_url,
// rewrites next_action to a page of its own (challengePath), and that
// page completes the authentication through localstripe's
// /_authenticate, then sends the shopper to the return_url, as Stripe's
// hosted authentication page does.

// challengePath is the proxy's authentication page: challengePath + pi id.
const challengePath = "/_3ds/"

// withoutReturnURL strips return_url from a PaymentIntent's creation (and
// confirmation), which localstripe would refuse, and returns it.
func withoutReturnURL(r *http.Request, body []byte) ([]byte, string) {
	if r.Method != "POST" || !strings.HasPrefix(r.URL.Path, "/v1/payment_intents") {
		return body, ""
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("return_url") == "" {
		return body, ""
	}
	ret := form.Get("return_url")
	form.Del("return_url")
	return []byte(form.Encode()), ret
}

// redirect3DS rewrites a PaymentIntent answer awaiting authentication as
// Stripe writes it for a PaymentIntent confirmed with a return_url:
// next_action redirect_to_url, the page the proxy serves. returnURL, if
// set, is the return_url of this answer's request (a creation).
func (p *Proxy) redirect3DS(out []byte, returnURL string) []byte {
	var pi map[string]any
	if json.Unmarshal(out, &pi) != nil || pi["object"] != "payment_intent" {
		return out
	}
	id, _ := pi["id"].(string)
	p.mu.Lock()
	if returnURL != "" {
		if p.returns == nil {
			p.returns = make(map[string]string)
		}
		p.returns[id] = returnURL
	}
	ret, known := p.returns[id]
	p.mu.Unlock()
	na, _ := pi["next_action"].(map[string]any)
	if !known || pi["status"] != "requires_action" || na == nil || na["type"] != "use_stripe_sdk" {
		return out
	}
	pi["next_action"] = map[string]any{"type": "redirect_to_url",
		"redirect_to_url": map[string]any{"url": p.URL + challengePath + id, "return_url": ret}}
	b, err := json.Marshal(pi)
	if err != nil {
		return out
	}
	return b
}

// serveChallenge serves the authentication page of a PaymentIntent:
// GET shows two buttons, POST (outcome=authenticate|fail) completes it at
// localstripe and redirects to the return_url. False for any other path.
func (p *Proxy) serveChallenge(w http.ResponseWriter, r *http.Request) bool {
	id, ok := strings.CutPrefix(r.URL.Path, challengePath)
	if !ok {
		return false
	}
	p.mu.Lock()
	ret, known := p.returns[id]
	p.mu.Unlock()
	if !known || !strings.HasPrefix(id, "pi_") {
		http.NotFound(w, r)
		return true
	}
	if r.Method == "GET" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>Stripe double: 3-D Secure</title>
<form method="post"><button name="outcome" value="authenticate">Authenticate</button>
<button name="outcome" value="fail">Fail</button></form><p>%s</p></html>`, html.EscapeString(id))
		return true
	}
	if err := r.ParseForm(); err != nil || r.Method != "POST" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return true
	}
	secret, err := p.clientSecret(id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return true
	}
	form := url.Values{"client_secret": {secret}, "success": {fmt.Sprint(r.PostForm.Get("outcome") == "authenticate")}}
	auth, _ := http.NewRequest("POST", p.target+"/v1/payment_intents/"+url.PathEscape(id)+"/_authenticate",
		strings.NewReader(form.Encode()))
	auth.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	auth.Header.Set("Authorization", "Bearer sk_test_double")
	resp, err := http.DefaultClient.Do(auth)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return true
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		http.Error(w, "localstripe: "+string(b), http.StatusBadGateway)
		return true
	}
	http.Redirect(w, r, ret, http.StatusSeeOther)
	return true
}

// clientSecret reads a PaymentIntent's client secret from the double.
func (p *Proxy) clientSecret(id string) (string, error) {
	req, _ := http.NewRequest("GET", p.target+"/v1/payment_intents/"+url.PathEscape(id), nil)
	req.Header.Set("Authorization", "Bearer sk_test_double")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var pi struct {
		ClientSecret string `json:"client_secret"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&pi); err != nil || pi.ClientSecret == "" {
		return "", fmt.Errorf("no client secret for %s", id)
	}
	return pi.ClientSecret, nil
}
