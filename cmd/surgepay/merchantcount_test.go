package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/sqlite"
)

// TestServeLoneMerchantShare: serve counts the enabled merchants. With
// merchant_inflight_max at its default, the development merchant alone
// holds twice a quarter of inflight_max in slow bodies and is still
// served; once a second merchant is made through the admin API it is
// refused 429 merchant_concurrency_limit (a quarter again), and once that
// merchant is disabled it is served again.
func TestServeLoneMerchantShare(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	cfg := testConfig(t, dir, map[string]string{"SURGEPAY_INFLIGHT_MAX": "8"}) // a quarter: 2
	s := startServe(t, cfg)
	raw, err := os.ReadFile(filepath.Join(dir, "dev-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(raw))
	for range 4 { // slow bodies: headers, then one byte of 64
		c, err := net.Dial("tcp", cfg.Listen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "POST /v1/customers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key+
			"\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
	}
	status := func() (int, string) {
		req, _ := http.NewRequest("GET", s.url+"/v1/customers", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	until := func(what string, ok func(int, string) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, body := status()
			if ok(code, body) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: last answer %d %s", what, code, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	served := func(code int, _ string) bool { return code == http.StatusOK }
	refused := func(code int, body string) bool {
		return code == http.StatusTooManyRequests && strings.Contains(body, "merchant_concurrency_limit")
	}
	until("the lone merchant served while holding 4 slow bodies", served)

	token := readAdminToken(t, dir)
	admin := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+cfg.AdminListen+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		return string(b)
	}
	out := admin("POST", "/admin/v1/merchants", `{"name":"Second shop"}`)
	i := strings.Index(out, `"mer_`)
	if i < 0 {
		t.Fatalf("no merchant ID in %s", out)
	}
	mid := out[i+1 : i+1+strings.IndexByte(out[i+1:], '"')]
	until("a quarter again once a second merchant is made", refused)
	admin("POST", "/admin/v1/merchants/"+mid+"/disable", `{}`)
	until("all of inflight_max again once it is disabled", served)
}

// TestServeConnectionsMax: with connections_max connections open, a new
// client takes the place of the one idle longest (closed, counted in
// connection_evictions_total) once that one has been idle a second
// (api.EvictIdleMinDefault; meanwhile it waits, counted in
// connection_waits_total); with every connection busy (a request half
// sent on each), a new client waits in connect, unanswered, and is served
// once one of them is answered and has been idle a second.
func TestServeConnectionsMax(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	cfg := testConfig(t, dir, map[string]string{"SURGEPAY_CONNECTIONS_MAX": "3"})
	startServe(t, cfg)
	raw, err := os.ReadFile(filepath.Join(dir, "dev-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(raw))
	head := "GET /v1/customers HTTP/1.1\r\nHost: x\r\n"
	request := head + "Authorization: Bearer " + key + "\r\n\r\n"
	dial := func() net.Conn {
		c, err := net.Dial("tcp", cfg.Listen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	send := func(c net.Conn, s string) {
		t.Helper()
		if _, err := io.WriteString(c, s); err != nil {
			t.Fatal(err)
		}
	}
	served := func(c net.Conn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		defer res.Body.Close()
		_, err = io.Copy(io.Discard, res.Body)
		return err == nil && res.StatusCode == 200
	}
	metrics := func() string {
		_, body := getAuth(t, "http://"+cfg.AdminListen+"/metrics", readAdminToken(t, dir))
		return body
	}
	var conns []net.Conn
	for range 3 { // answered, then kept open, idle
		c := dial()
		send(c, request)
		if !served(c, 10*time.Second) {
			t.Fatal("an open connection was not served")
		}
		conns = append(conns, c)
		time.Sleep(50 * time.Millisecond) // idle in this order
	}
	fourth := dial()
	send(fourth, request)
	if !served(fourth, 10*time.Second) {
		t.Fatal("a fourth connection was not served with 3 idle open and connections_max 3")
	}
	conns[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conns[0].Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the connection idle longest was not closed for the fourth (%d, %v)", n, err)
	}
	m := metrics()
	if o, mx, e, w := metricValue(t, m, "surgepay_http_connections_open"), metricValue(t, m, "surgepay_http_connections_max"),
		metricValue(t, m, "surgepay_http_connection_evictions_total"), metricValue(t, m, "surgepay_http_connection_waits_total"); o != 3 || mx != 3 || e != 1 || w != 1 {
		t.Errorf("connections open %v max %v evictions %v waits %v; want 3, 3, 1, 1", o, mx, e, w)
	}

	busy := []net.Conn{conns[1], conns[2], fourth}
	for _, c := range busy { // a request half sent on each
		send(c, head)
	}
	time.Sleep(200 * time.Millisecond) // the server reads what was sent
	late := dial()
	send(late, request)
	if served(late, 300*time.Millisecond) {
		t.Fatal("a connection was served over connections_max while every connection was busy")
	}
	if w := metricValue(t, metrics(), "surgepay_http_connection_waits_total"); w < 2 {
		t.Errorf("connection waits %v, want at least 2", w)
	}
	send(busy[0], "Authorization: Bearer "+key+"\r\n\r\n")
	if !served(busy[0], 10*time.Second) {
		t.Fatal("a busy connection was not answered")
	}
	if !served(late, 10*time.Second) {
		t.Fatal("the waiting connection was not served once a connection fell idle")
	}
}

// TestServeIdempotencyFilterMetrics: the embedded store's filter of stored
// idempotency keys and its writer's commit phases are on /metrics; sales with new keys are answered by it
// twice each (the lookup before the processor call, and the writer's
// probe); a replay is answered before the filter (the newest keys are in
// memory).
func TestServeIdempotencyFilterMetrics(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	s := startServe(t, cfg)
	c := newClient(s.url, readDevKey(t, dir))
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada Lovelace"}, 200, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}}, 200, &pm)
	// The first filter is built in the background of the start (a
	// restart serves at once): its checks count once it is in use.
	metrics := func() string {
		_, body := getAuth(t, "http://"+cfg.AdminListen+"/metrics", readAdminToken(t, dir))
		return body
	}
	for deadline := time.Now().Add(time.Minute); metricValue(t, metrics(), "surgepay_idempotency_filter_builds_total") < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the first filter of idempotency keys not built within a minute of the start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	const sales = 5
	sale := map[string]any{"amount": 1000, "currency": "usd", "customer": cus.ID, "payment_method": pm.ID}
	for i := range sales {
		c.must(t, "POST", "/v1/payments", fmt.Sprintf("order-%d", i), sale, 200, nil)
	}
	c.must(t, "POST", "/v1/payments", "order-0", sale, 200, nil) // a replay
	m := metrics()
	for name, want := range map[string]float64{
		`surgepay_idempotency_filter_checks_total{answer="absent",check="lookup"}`: sales,
		`surgepay_idempotency_filter_checks_total{answer="absent",check="insert"}`: sales,
		`surgepay_idempotency_filter_checks_total{answer="maybe",check="lookup"}`:  0,
		`surgepay_idempotency_filter_false_positives_total{check="lookup"}`:        0,
		`surgepay_idempotency_filter_builds_total`:                                 1,
		// Sized ahead: 10 bits for each of the default 10 M keys.
		`surgepay_idempotency_filter_bytes`: sqlite.IdempotencyFilterKeysDefault * 10 / 8,
	} {
		if got := metricValue(t, m, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// The writer's time per phase of its commits.
	for _, phase := range []string{"lock", "apply", "merge", "commit"} {
		name := `surgepay_sqlite_commit_phase_seconds_total{phase="` + phase + `"}`
		if got := metricValue(t, m, name); got <= 0 {
			t.Errorf("%s = %v, want some time", name, got)
		}
	}
	// The background checkpoints (every 250 ms): every outcome is a
	// series, and one has copied the sales' WAL.
	for _, outcome := range []string{"complete", "partial", "busy", "error"} {
		if name := `surgepay_sqlite_checkpoints_total{outcome="` + outcome + `"}`; metricValue(t, m, name) < 0 {
			t.Errorf("%s missing", name)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); metricValue(t, m, "surgepay_sqlite_wal_frames_max") <= 0; {
		if time.Now().After(deadline) {
			t.Fatalf("surgepay_sqlite_wal_frames_max = %v after 10 s of checkpoints; want the sales' WAL", metricValue(t, m, "surgepay_sqlite_wal_frames_max"))
		}
		time.Sleep(100 * time.Millisecond)
		_, m = getAuth(t, "http://"+cfg.AdminListen+"/metrics", readAdminToken(t, dir))
	}
}
