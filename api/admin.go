package api

import (
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/telemetry"
)

// AdminPrefix is the path prefix of the admin API.
const AdminPrefix = "/admin/v1/"

// AdminConfig configures the admin API.
type AdminConfig struct {
	Engine *engine.Engine
	Logger *slog.Logger
	// Actor names who calls, for the audit trail (the admin credential's
	// ID once the admin listener authenticates); nil: "admin_api".
	Actor func(r *http.Request) string
	// OnMerchantsChanged, if set, is called after a merchant is made,
	// disabled or enabled (serve counts them again: the default share
	// of in-flight requests depends on how many are enabled). It must
	// not block.
	OnMerchantsChanged func()
}

// Admin is the operators' API under AdminPrefix: merchants (create, list,
// show, disable, enable), API keys (create with scopes and an expiry,
// list, show, roll, revoke) and the audit trail. JSON, with the public
// API's error envelope and strict decoding (docs/admin-api.md). It is
// served on the admin listener only, never on the public one. Safe for
// concurrent use.
type Admin struct {
	cfg    AdminConfig
	eng    *engine.Engine
	log    *slog.Logger
	mux    *http.ServeMux
	routes []string
}

// NewAdmin returns the admin API.
func NewAdmin(cfg AdminConfig) *Admin {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Actor == nil {
		cfg.Actor = func(*http.Request) string { return "admin_api" }
	}
	a := &Admin{cfg: cfg, eng: cfg.Engine, log: cfg.Logger, mux: http.NewServeMux()}
	a.handle("GET /admin/v1/merchants", a.listMerchants)
	a.handle("POST /admin/v1/merchants", a.createMerchant)
	a.handle("GET /admin/v1/merchants/{id}", a.getMerchant)
	a.handle("POST /admin/v1/merchants/{id}/disable", a.setMerchant(true))
	a.handle("POST /admin/v1/merchants/{id}/enable", a.setMerchant(false))
	a.handle("GET /admin/v1/api_keys", a.listKeys)
	a.handle("POST /admin/v1/api_keys", a.createKey)
	a.handle("GET /admin/v1/api_keys/{id}", a.getKey)
	a.handle("POST /admin/v1/api_keys/{id}/roll", a.rollKey)
	a.handle("POST /admin/v1/api_keys/{id}/expire", a.expireKey)
	a.handle("POST /admin/v1/api_keys/{id}/revoke", a.revokeKey)
	a.handle("GET /admin/v1/audit_events", a.listAudit)
	a.mux.HandleFunc(AdminPrefix, func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedOn(a.mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			a.fail(w, r, &surgepay.Error{Code: ENOTALLOWED, Reason: "method_not_allowed",
				Message: r.Method + " is not allowed on " + truncate(r.URL.Path, 200) + "; allowed: " + strings.Join(allow, ", ")})
			return
		}
		a.fail(w, r, &surgepay.Error{Code: surgepay.ENOTFOUND, Reason: "route_not_found",
			Message: "no such route: " + r.Method + " " + truncate(r.URL.Path, 200)})
	})
	return a
}

// Routes returns the admin API's "METHOD /path" patterns.
func (a *Admin) Routes() []string { return append([]string(nil), a.routes...) }

func (a *Admin) handle(pattern string, h func(w http.ResponseWriter, r *http.Request) (any, error)) {
	a.routes = append(a.routes, pattern)
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		ctx := engine.WithActor(r.Context(), a.cfg.Actor(r))
		v, err := h(w, r.WithContext(ctx))
		if err != nil {
			a.fail(w, r, err)
			return
		}
		_, body := render(v, nil)
		writeJSON(w, http.StatusOK, body)
	})
}

// ServeHTTP serves the admin API. A panic is answered 500 and logged
// without its value (it may hold anything).
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			a.log.Error("panic serving admin request", "route", r.Pattern, "stack", telemetry.Stack())
			if !sw.wrote {
				a.fail(sw, r, &surgepay.Error{Code: surgepay.EINTERNAL, Reason: "internal_error", Message: "an internal error occurred"})
			}
		} else if v != nil {
			panic(v)
		}
	}()
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		// A malformed query would otherwise be dropped whole: a filter
		// silently ignored.
		a.fail(sw, r, surgepay.Invalid("query", "invalid_query", "the query string is malformed: %v", err))
		return
	}
	a.mux.ServeHTTP(sw, r)
}

func (a *Admin) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, body := render(nil, err)
	if status >= 500 {
		a.log.Error("admin request failed", "route", r.Pattern, "status", status, "err", telemetry.Redact(err.Error()))
	}
	setRetryAfter(w, err)
	writeJSON(w, status, body)
}

// WriteAdminError answers err as the admin API does: its status and the
// error envelope {"error":{"type","code","message","param"}}, no-store.
// The admin listener's guard answers with it what it refuses under
// AdminPrefix before the admin API sees it (a read-only credential's
// POST), so that a client reads one format.
func WriteAdminError(w http.ResponseWriter, err error) {
	status, body := render(nil, err)
	setRetryAfter(w, err)
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// allowedOn returns the methods mux serves on r's path, if r's own is not
// one of them.
func allowedOn(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{"GET", "POST", "DELETE", "PUT", "PATCH"} {
		if m == r.Method {
			continue
		}
		c := r.Clone(r.Context())
		c.Method = m
		if _, pat := mux.Handler(c); pat != "" && pat != AdminPrefix {
			out = append(out, m)
		}
	}
	return out
}

type merchantJSON struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	Name     string `json:"name"`
	Created  int64  `json:"created"`
	Disabled bool   `json:"disabled"`
}

func merchantOf(m *surgepay.Merchant) merchantJSON {
	return merchantJSON{ID: m.ID, Object: "merchant", Name: m.Name, Created: m.Created.Unix(), Disabled: m.Disabled}
}

// apiKeyJSON is a key without its secret, which is not stored; Secret is
// set only in the answer that creates it (create, roll).
type apiKeyJSON struct {
	ID       string   `json:"id"`
	Object   string   `json:"object"`
	Merchant string   `json:"merchant"`
	Prefix   string   `json:"prefix"`
	Scopes   []string `json:"scopes"` // empty: full access
	// Type is "secret" (sk_…) or "publishable" (pk_…, docs/checkout.md).
	Type             string `json:"type"`
	Created          int64  `json:"created"`
	LastUsed         *int64 `json:"last_used"`
	ExpiresAt        *int64 `json:"expires_at"`
	Expired          bool   `json:"expired"`
	Revoked          bool   `json:"revoked"`
	MerchantDisabled bool   `json:"merchant_disabled"`
	Secret           string `json:"secret,omitempty"`
}

func unixOrNil(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.Unix()
	return &n
}

func apiKeyOf(k *surgepay.APIKey, now time.Time) apiKeyJSON {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	typ := "secret"
	if k.Publishable() {
		typ = "publishable"
	}
	return apiKeyJSON{ID: k.ID, Object: "api_key", Merchant: k.MerchantID, Prefix: k.Prefix, Scopes: scopes, Type: typ,
		Created: k.Created.Unix(), LastUsed: unixOrNil(k.LastUsed), ExpiresAt: unixOrNil(k.Expires),
		Expired: k.Expired(now), Revoked: k.Revoked, MerchantDisabled: k.MerchantDisabled}
}

type auditJSON struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	Created  int64  `json:"created"`
	Actor    string `json:"actor"`
	Action   string `json:"action"`
	Merchant string `json:"merchant"`
	ObjectID string `json:"object_id"`
	Detail   string `json:"detail"`
}

func auditOf(e *surgepay.AuditEvent) auditJSON {
	return auditJSON{ID: e.ID, Object: "audit_event", Created: e.Created.Unix(), Actor: e.Actor, Action: e.Action,
		Merchant: e.MerchantID, ObjectID: e.ObjectID, Detail: e.Detail}
}

func (a *Admin) listMerchants(w http.ResponseWriter, r *http.Request) (any, error) {
	ms, err := a.eng.ListMerchants(r.Context())
	if err != nil {
		return nil, err
	}
	return listOf(ms, false, merchantOf), nil
}

func (a *Admin) createMerchant(w http.ResponseWriter, r *http.Request) (any, error) {
	var req struct {
		Name *string `json:"name"`
	}
	if err := a.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if req.Name == nil {
		return nil, surgepay.Invalid("name", "parameter_missing", "name is required")
	}
	m, err := a.eng.CreateMerchant(r.Context(), *req.Name)
	if err != nil {
		return nil, err
	}
	a.merchantsChanged()
	return merchantOf(m), nil
}

// merchantsChanged tells serve that the merchants changed.
func (a *Admin) merchantsChanged() {
	if a.cfg.OnMerchantsChanged != nil {
		a.cfg.OnMerchantsChanged()
	}
}

func (a *Admin) getMerchant(w http.ResponseWriter, r *http.Request) (any, error) {
	m, err := a.eng.GetMerchant(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, notFoundParam(err, "id")
	}
	return merchantOf(m), nil
}

func (a *Admin) setMerchant(disabled bool) func(w http.ResponseWriter, r *http.Request) (any, error) {
	return func(w http.ResponseWriter, r *http.Request) (any, error) {
		if err := a.decodeBody(w, r, &struct{}{}); err != nil {
			return nil, err
		}
		m, err := a.eng.SetMerchantDisabled(r.Context(), r.PathValue("id"), disabled)
		if err != nil {
			return nil, notFoundParam(err, "id")
		}
		a.merchantsChanged()
		return merchantOf(m), nil
	}
}

func (a *Admin) listKeys(w http.ResponseWriter, r *http.Request) (any, error) {
	// This node's last-used times first, so the list is current here.
	if err := a.eng.FlushKeyUses(r.Context()); err != nil {
		a.log.Warn("flush API key last-used times before a list", "err", err.Error())
	}
	keys, err := a.eng.ListAPIKeys(r.Context(), r.URL.Query().Get("merchant"))
	if err != nil {
		return nil, err
	}
	now := a.eng.Now()
	return listOf(keys, false, func(k *surgepay.APIKey) apiKeyJSON { return apiKeyOf(k, now) }), nil
}

func (a *Admin) getKey(w http.ResponseWriter, r *http.Request) (any, error) {
	k, err := a.eng.GetAPIKey(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, notFoundParam(err, "id")
	}
	return apiKeyOf(k, a.eng.Now()), nil
}

// expiry is the optional expiry of a key being made: expires_at (RFC
// 3339) or expires_in (a Go duration such as "720h"), not both.
type expiry struct {
	ExpiresAt *string `json:"expires_at"`
	ExpiresIn *string `json:"expires_in"`
}

func (x expiry) time(now time.Time) (time.Time, error) {
	switch {
	case x.ExpiresAt != nil && x.ExpiresIn != nil:
		return time.Time{}, surgepay.Invalid("expires_in", "invalid_value", "give expires_at or expires_in, not both")
	case x.ExpiresAt != nil:
		t, err := time.Parse(time.RFC3339, *x.ExpiresAt)
		if err != nil {
			return time.Time{}, surgepay.Invalid("expires_at", "invalid_value", "expires_at must be an RFC 3339 time, e.g. 2027-01-31T00:00:00Z")
		}
		return t, nil
	case x.ExpiresIn != nil:
		d, err := time.ParseDuration(*x.ExpiresIn)
		if err != nil || d <= 0 || d > engine.APIKeyLifetimeMax {
			return time.Time{}, surgepay.Invalid("expires_in", "invalid_value", "expires_in must be a duration such as 720h, above 0 and at most %v", engine.APIKeyLifetimeMax)
		}
		return now.Add(d), nil
	}
	return time.Time{}, nil
}

func (a *Admin) createKey(w http.ResponseWriter, r *http.Request) (any, error) {
	var req struct {
		Merchant *string  `json:"merchant"`
		Scopes   []string `json:"scopes"`
		// Type is "secret" (the default) or "publishable".
		Type string `json:"type"`
		expiry
	}
	if err := a.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if req.Merchant == nil {
		return nil, surgepay.Invalid("merchant", "parameter_missing", "merchant is required")
	}
	var scopes []string
	var err error
	switch req.Type {
	case "", "secret":
		if scopes, err = surgepay.ParseScopes("scopes", req.Scopes); err != nil {
			return nil, err
		}
	case "publishable":
		if req.Scopes != nil {
			return nil, surgepay.Invalid("scopes", "invalid_scope", "a publishable key has the one scope %s: give no scopes",
				surgepay.ScopeCheckout)
		}
	default:
		return nil, surgepay.Invalid("type", "invalid_value", "type must be secret or publishable")
	}
	exp, err := req.time(a.eng.Now())
	if err != nil {
		return nil, err
	}
	secret, k, err := a.eng.CreateAPIKeyWith(r.Context(), *req.Merchant,
		engine.KeyOptions{Scopes: scopes, Expires: exp, Publishable: req.Type == "publishable"})
	if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
		return nil, surgepay.NotFound("merchant", "merchant")
	} else if err != nil {
		return nil, err
	}
	out := apiKeyOf(k, a.eng.Now())
	out.Secret = secret
	return out, nil
}

func (a *Admin) rollKey(w http.ResponseWriter, r *http.Request) (any, error) {
	var req struct {
		Grace *string `json:"grace"`
		expiry
	}
	if err := a.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if req.Grace == nil {
		return nil, surgepay.Invalid("grace", "parameter_missing", "grace is required: how long the old secret keeps working, e.g. \"24h\", or \"0s\" to stop it at once")
	}
	grace, err := time.ParseDuration(*req.Grace)
	if err != nil {
		return nil, surgepay.Invalid("grace", "invalid_value", "grace must be a duration such as 24h, 0 to %v", engine.APIKeyRollGraceMax)
	}
	exp, err := req.time(a.eng.Now())
	if err != nil {
		return nil, err
	}
	rolled, err := a.eng.RollAPIKey(r.Context(), r.PathValue("id"), grace, exp)
	if err != nil {
		return nil, notFoundParam(err, "id")
	}
	now := a.eng.Now()
	out := struct {
		Object string     `json:"object"`
		New    apiKeyJSON `json:"new"`
		Old    apiKeyJSON `json:"old"`
	}{"api_key_roll", apiKeyOf(rolled.New, now), apiKeyOf(rolled.Old, now)}
	out.New.Secret = rolled.Secret
	return out, nil
}

func (a *Admin) expireKey(w http.ResponseWriter, r *http.Request) (any, error) {
	var req expiry
	if err := a.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if req.ExpiresAt == nil && req.ExpiresIn == nil {
		return nil, surgepay.Invalid("expires_at", "parameter_missing", "expires_at or expires_in is required")
	}
	exp, err := req.time(a.eng.Now())
	if err != nil {
		return nil, err
	}
	k, err := a.eng.ExpireAPIKey(r.Context(), r.PathValue("id"), exp)
	if err != nil {
		return nil, notFoundParam(err, "id")
	}
	return apiKeyOf(k, a.eng.Now()), nil
}

func (a *Admin) revokeKey(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := a.decodeBody(w, r, &struct{}{}); err != nil {
		return nil, err
	}
	k, err := a.eng.RevokeAPIKey(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, notFoundParam(err, "id")
	}
	return apiKeyOf(k, a.eng.Now()), nil
}

func (a *Admin) listAudit(w http.ResponseWriter, r *http.Request) (any, error) {
	page, err := pageOf(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	f := surgepay.AuditFilter{Page: page, MerchantID: q.Get("merchant"), ObjectID: q.Get("object")}
	es, more, err := a.eng.ListAuditEvents(r.Context(), f)
	if err != nil {
		return nil, err
	}
	return listOf(es, more, auditOf), nil
}

// decodeBody reads and strictly decodes a JSON body (an empty one is {}).
func (a *Admin) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decode(b, v)
}
