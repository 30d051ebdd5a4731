package console

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

// The merchants' pages: the merchants, and a merchant's API keys with
// the admin API's key actions (create, roll, revoke), each confirmed
// first and done through the admin API's engine calls, at most once per
// confirmation (engine.CreateAPIKeyOnce and its siblings), audited with
// the operator as the actor. A new secret is shown once, on the page
// that answers the POST (no-store, never in a URL, never logged).

// Bounds of the merchants' pages.
const (
	// MerchantsPageDefault and MerchantsPageMax bound a page of the
	// merchants list; "after" goes on.
	MerchantsPageDefault = 50
	MerchantsPageMax     = 500
	// RollGraceDefault is the grace a roll's confirmation offers.
	RollGraceDefault = 24 * time.Hour
)

// keyNotices are the messages of a key action's redirect (?done=).
var keyNotices = map[string]string{
	"revoked":   "The key is revoked: its secret is refused from now on.",
	"replayed":  "This confirmation was submitted before: nothing more was done. A key it made is in the list; its secret was shown once, on the first answer.",
	"duplicate": "This confirmation was already used with other values: nothing was done. Start again from this page.",
	"in_use":    "This confirmation is being acted on by another request: nothing more was done.",
}

// merchantPath is a merchant's page in the console.
func merchantPath(id string) string { return Prefix + "merchants/" + url.PathEscape(id) }

// merchantsPage is the data of merchants.html.
type merchantsPage struct {
	Rows  []*surgepay.Merchant
	Limit int
	Next  string
	Err   *fieldError
}

// merchantsList serves the merchants, by ID, a bounded page.
func (c *Console) merchantsList(w http.ResponseWriter, r *http.Request) {
	d := merchantsPage{Limit: MerchantsPageDefault}
	f, ferr := fields(r.URL.RawQuery, "limit", "after")
	if ferr == nil {
		d.Limit, ferr = limitField(f["limit"], MerchantsPageDefault, MerchantsPageMax)
	}
	if ferr != nil {
		d.Err = ferr
		c.render(w, http.StatusBadRequest, "merchants.html", d)
		return
	}
	ms, err := c.eng.ListMerchants(r.Context())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
	after := f["after"]
	i := sort.Search(len(ms), func(i int) bool { return ms[i].ID > after })
	ms = ms[i:]
	if len(ms) > d.Limit {
		ms = ms[:d.Limit]
		d.Next = Prefix + "merchants?" + url.Values{"after": {ms[len(ms)-1].ID}, "limit": {f["limit"]}}.Encode()
	}
	d.Rows = ms
	c.render(w, http.StatusOK, "merchants.html", d)
}

// keyRow is an API key as a merchant's page shows it: never a secret
// (none is stored), its prefix.
type keyRow struct {
	*surgepay.APIKey
	Expired bool
}

// merchantPage is the data of merchant.html.
type merchantPage struct {
	M      *surgepay.Merchant
	Keys   []keyRow
	Scopes []string // the scopes and presets a key may be made with
	Notice string
	Grace  string
	// ReadOnly leaves the key actions out: a read-only operator
	// (readonly.go).
	ReadOnly bool
}

// scopeChoices are the values of a new key's scopes field: the presets,
// then every scope.
var scopeChoices = append([]string{surgepay.ScopePresetFull, surgepay.ScopePresetReadOnly,
	surgepay.ScopePresetPaymentsNoRefunds}, surgepay.AllScopes...)

// merchant serves a merchant's page: its facts and its API keys.
func (c *Console) merchant(w http.ResponseWriter, r *http.Request) {
	m, err := c.eng.GetMerchant(r.Context(), r.PathValue("merchant"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	// This node's last-used times first, as the admin API's list does.
	if err := c.eng.FlushKeyUses(r.Context()); err != nil {
		c.log.Warn("console: flush API key last-used times", "err", err.Error())
	}
	keys, err := c.eng.ListAPIKeys(r.Context(), m.ID)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	now := c.eng.Now()
	d := merchantPage{M: m, Scopes: scopeChoices, Notice: keyNotices[r.URL.Query().Get("done")], Grace: RollGraceDefault.String(),
		ReadOnly: c.readOnly(r)}
	for _, k := range keys {
		d.Keys = append(d.Keys, keyRow{APIKey: k, Expired: k.Expired(now)})
	}
	sort.Slice(d.Keys, func(i, j int) bool { return d.Keys[i].ID > d.Keys[j].ID })
	c.render(w, http.StatusOK, "merchant.html", d)
}

// keyForm is a key action's parsed fields.
type keyForm struct {
	Scopes    []string // as ParseScopes made them; nil: full access
	ScopeText []string // as chosen, for the confirmation and the POST
	ExpiresIn string
	Expires   time.Duration // 0: never
	Grace     string
	GraceDur  time.Duration
}

// body is the canonical text of the form, for its request hash: the same
// confirmation with other values is refused, not acted on.
func (f *keyForm) body() string {
	return url.Values{"scopes": f.ScopeText, "expires_in": {f.ExpiresIn}, "grace": {f.Grace}}.Encode()
}

// parseKeyForm reads the fields of action ("create", "roll", "revoke")
// from vals.
func parseKeyForm(action string, vals url.Values) (*keyForm, *fieldError) {
	f := &keyForm{}
	one := func(name string) (string, *fieldError) {
		vs := vals[name]
		if len(vs) > 1 {
			return "", badField(name, "is given %d times; give it once", len(vs))
		}
		if len(vs) == 0 {
			return "", nil
		}
		return cleanField(name, vs[0])
	}
	var ferr *fieldError
	if action == "revoke" {
		return f, nil
	}
	if f.ExpiresIn, ferr = one("expires_in"); ferr != nil {
		return nil, ferr
	}
	if f.ExpiresIn != "" {
		d, err := time.ParseDuration(f.ExpiresIn)
		if err != nil || d <= 0 || d > engine.APIKeyLifetimeMax {
			return nil, badField("expires_in", "must be a duration such as 720h, above 0 and at most %v; empty: never", engine.APIKeyLifetimeMax)
		}
		f.Expires = d
	}
	if action == "roll" {
		return f, f.parseGrace(one)
	}
	return f, f.parseScopes(vals["scopes"])
}

func (f *keyForm) parseGrace(one func(string) (string, *fieldError)) *fieldError {
	var ferr *fieldError
	if f.Grace, ferr = one("grace"); ferr != nil {
		return ferr
	}
	if f.Grace == "" {
		return badField("grace", "is required: how long the old secret keeps working, such as 24h, or 0s to stop it at once")
	}
	d, err := time.ParseDuration(f.Grace)
	if err != nil || d < 0 || d > engine.APIKeyRollGraceMax {
		return badField("grace", "must be a duration from 0s (at once) to %v", engine.APIKeyRollGraceMax)
	}
	f.GraceDur = d
	return nil
}

func (f *keyForm) parseScopes(vs []string) *fieldError {
	if len(vs) > len(scopeChoices) {
		return badField("scopes", "holds more than %d choices", len(scopeChoices))
	}
	for _, v := range vs {
		if !contains(scopeChoices, v) {
			return badField("scopes", "holds a value that is not a scope")
		}
	}
	if len(vs) == 0 {
		vs = []string{surgepay.ScopePresetFull}
	}
	scopes, err := surgepay.ParseScopes("scopes", vs)
	if err != nil {
		return badField("scopes", "%s", errMessage(err))
	}
	f.Scopes, f.ScopeText = scopes, vs
	return nil
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// keyConfirmPage is the data of keyconfirm.html.
type keyConfirmPage struct {
	Verb   string // Create, Roll, Revoke
	Action string // the form's path
	M      *surgepay.Merchant
	K      *surgepay.APIKey // roll, revoke
	F      *keyForm
	Until  time.Time // roll: the end of the grace
	Key    string
	CSRF   string
}

// keyResultPage is the data of keyresult.html: the one page that shows a
// secret.
type keyResultPage struct {
	M      *surgepay.Merchant
	New    *surgepay.APIKey
	Old    *surgepay.APIKey // roll
	Secret string
}

var keyVerbs = map[string]string{"create": "Create", "roll": "Roll", "revoke": "Revoke"}

// keyTarget reads the merchant and, but for a create, the key of a key
// action's path; it answers a refusal itself and returns ok false.
func (c *Console) keyTarget(w http.ResponseWriter, r *http.Request) (string, *surgepay.Merchant, *surgepay.APIKey, bool) {
	action := r.PathValue("action")
	if r.PathValue("key") == "" {
		action = "create"
	}
	if _, ok := keyVerbs[action]; !ok {
		c.fail(w, r, http.StatusNotFound, "No such action", "The actions on a key are roll and revoke.")
		return "", nil, nil, false
	}
	m, err := c.eng.GetMerchant(r.Context(), r.PathValue("merchant"))
	if err != nil {
		c.failErr(w, r, err)
		return "", nil, nil, false
	}
	if action == "create" {
		return action, m, nil, true
	}
	k, err := c.eng.GetAPIKey(r.Context(), r.PathValue("key"))
	if err == nil && k.MerchantID != m.ID {
		err = surgepay.NotFound("key", "API key of this merchant")
	}
	if err != nil {
		c.failErr(w, r, err)
		return "", nil, nil, false
	}
	return action, m, k, true
}

// failField answers a 400 page naming the field.
func (c *Console) failField(w http.ResponseWriter, r *http.Request, ferr *fieldError) {
	c.fail(w, r, http.StatusBadRequest, "Bad field", "Field "+ferr.Field+": "+ferr.Message)
}

// confirmKey serves a key action's confirmation page.
func (c *Console) confirmKey(w http.ResponseWriter, r *http.Request) {
	action, m, k, ok := c.keyTarget(w, r)
	if !ok {
		return
	}
	f, ferr := parseKeyForm(action, r.URL.Query())
	if ferr != nil {
		c.failField(w, r, ferr)
		return
	}
	if k != nil && action == "roll" && (k.Revoked || k.Expired(c.eng.Now())) {
		c.fail(w, r, http.StatusConflict, "Refused", "The key is revoked or expired: create a new one.")
		return
	}
	c.render(w, http.StatusOK, "keyconfirm.html", keyConfirmPage{Verb: keyVerbs[action], Action: r.URL.Path, M: m, K: k,
		F: f, Until: c.eng.Now().Add(f.GraceDur), Key: newKey(), CSRF: c.csrfToken(w, r)})
}

// actKey serves a key action's POST.
func (c *Console) actKey(w http.ResponseWriter, r *http.Request) {
	if !c.actionForm(w, r) {
		return
	}
	action, m, k, ok := c.keyTarget(w, r)
	if !ok {
		return
	}
	f, ferr := parseKeyForm(action, r.PostForm)
	if ferr != nil {
		c.failField(w, r, ferr)
		return
	}
	call := c.operatorCall(r, f.body())
	var exp time.Time
	if f.Expires > 0 {
		exp = c.eng.Now().Add(f.Expires)
	}
	res := keyResultPage{M: m}
	var err error
	switch action {
	case "create":
		res.Secret, res.New, err = c.eng.CreateAPIKeyOnce(r.Context(), call, engine.KeyOptions{Scopes: f.Scopes, Expires: exp})
	case "roll":
		var rolled *engine.Rolled
		if rolled, err = c.eng.RollAPIKeyOnce(r.Context(), call, k.ID, f.GraceDur, exp); err == nil {
			res.Secret, res.New, res.Old = rolled.Secret, rolled.New, rolled.Old
		}
	default:
		_, err = c.eng.RevokeAPIKeyOnce(r.Context(), call, k.ID)
	}
	c.finishKey(w, r, action, res, err)
}

// finishKey answers a key action: the one-time page of a new secret,
// back to the merchant's page with a notice, or a refusal.
func (c *Console) finishKey(w http.ResponseWriter, r *http.Request, action string, res keyResultPage, err error) {
	done := "made"
	if action == "revoke" {
		done = "revoked"
	}
	if _, ok := engine.IsReplay(err); ok {
		done, err = "replayed", nil
	}
	switch surgepay.ErrorReason(err) {
	case "idempotency_key_reused":
		done, err = "duplicate", nil
	case "idempotency_key_in_use":
		done, err = "in_use", nil
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	keyID := ""
	if res.New != nil {
		keyID = res.New.ID
	}
	// Never the secret: the key's ID names what was made.
	c.log.Info("console key action", "actor", c.actor(r), "merchant", res.M.ID, "action", action, "key", keyID, "outcome", done)
	if done != "made" {
		http.Redirect(w, r, merchantPath(res.M.ID)+"?done="+done, http.StatusSeeOther) //nolint:gosec // G710: a path of this console (merchantPath escapes the ID), done one of keyNotices' keys
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, http.StatusOK, "keyresult.html", res)
}

// scopeText is how a page shows a key's scopes.
func scopeText(scopes []string) string {
	if len(scopes) == 0 {
		return "full access"
	}
	return strings.Join(scopes, ", ")
}
