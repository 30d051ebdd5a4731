package api_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/sqlite"
)

// Card numbers used only by this test, so a find means a leak. Each is a
// Luhn-valid number the simulator approves or declines.
var scanCards = []struct{ number, cvc string }{
	{"4111111111111111", "731"},
	{"5105105105105100", "842"},
	{"4000000000009995", "953"}, // declined: insufficient funds
	{"4000000000000002", "164"}, // declined
	{"378734493671000", "2751"}, // amex
	{"6011000990139424", "386"},
}

// cardTraffic sends every card through every route that takes one, the
// error paths included, and returns all response bodies.
func cardTraffic(t *testing.T, e *env) string {
	var out strings.Builder
	cus := e.must(200, e.keyA, "POST", "/v1/customers", `{"name":"Scan"}`).str("id")
	for _, c := range scanCards {
		card := `{"number":"` + c.number + `","exp_month":12,"exp_year":2031,"cvc":"` + c.cvc + `"}`
		bodies := []string{
			`{"customer":"` + cus + `","card":` + card + `}`,                                                               // ok
			`{"customer":"cus_missing","card":` + card + `}`,                                                               // 404
			`{"customer":"` + cus + `","card":` + strings.Replace(card, "2031", "2019", 1) + `}`,                           // expired
			`{"customer":"` + cus + `","card":` + strings.Replace(card, c.number, c.number[:len(c.number)-1]+"9", 1) + `}`, // Luhn
			`{"customer":"` + cus + `","card":` + card + `,"extra":"` + c.number + `"}`,                                    // unknown field
			`{"customer":"` + cus + `","card":{"number":` + c.number + `}}`,                                                // wrong type
		}
		var pm string
		for i, b := range bodies {
			r := e.do(e.keyA, "POST", "/v1/payment_methods", b, "")
			out.Write(r.Raw)
			if i == 0 {
				pm = r.str("id")
			}
		}
		for _, capture := range []string{"automatic", "manual"} {
			r := e.do(e.keyA, "POST", "/v1/payments", `{"amount":1000,"currency":"usd","payment_method":"`+pm+`","capture_method":"`+capture+`","cvc":"`+c.cvc+`"}`, "scan-"+c.cvc+capture)
			out.Write(r.Raw)
			if id := r.str("id"); id != "" && capture == "manual" {
				out.Write(e.do(e.keyA, "POST", "/v1/payments/"+id+"/capture", ``, "").Raw)
				out.Write(e.do(e.keyA, "POST", "/v1/payments/"+id+"/refunds", `{"amount":100}`, "").Raw)
				out.Write(e.do(e.keyA, "GET", "/v1/payments/"+id+"/events", ``, "").Raw)
			}
		}
		out.Write(e.do(e.keyA, "POST", "/v1/payments", `{"amount":1000,"currency":"usd","payment_method":"`+c.number+`"}`, "").Raw)
		// The number where no card belongs: text fields, metadata, headers.
		grouped := c.number[:4] + "." + c.number[4:8] + "." + c.number[8:12] + "." + c.number[12:]
		for _, b := range []string{`"description":"card ` + grouped + `"`, `"metadata":{"card":"` + c.number + `"}`,
			`"metadata":{"` + grouped + `":"x"}`} {
			r := e.do(e.keyA, "POST", "/v1/payments", `{"amount":1000,"currency":"usd","payment_method":"`+pm+`",`+b+`}`, "")
			out.Write(r.Raw)
		}
		out.Write(e.do(e.keyA, "POST", "/v1/customers", `{"name":"`+grouped+`"}`, "").Raw)
		out.Write(e.do(e.keyA, "POST", "/v1/customers", `{}`, "k-"+grouped).Raw)
		out.Write(e.do(e.keyA, "GET", "/v1/payment_methods/"+pm, ``, "").Raw)
	}
	out.Write(e.do(e.keyA, "GET", "/v1/payment_methods?customer="+cus, ``, "").Raw)
	out.Write(e.do(e.keyA, "GET", "/v1/payments?limit=100", ``, "").Raw)
	return out.String()
}

// leaks returns the card numbers and CVCs found in text. CVCs are looked
// for as JSON or log values, since three digits alone occur by chance.
func leaks(text string) []string {
	var found []string
	for _, c := range scanCards {
		// Plain or with separators between the digits ("4111.1111...").
		for _, n := range []string{c.number, c.number[:len(c.number)-1] + "9"} {
			if regexp.MustCompile(strings.Join(strings.Split(n, ""), `[ ._/-]?`)).MatchString(text) {
				found = append(found, "PAN "+c.number)
				break
			}
		}
		if regexp.MustCompile(`(?i)cvc\W{0,4}` + c.cvc).MatchString(text) {
			found = append(found, "CVC "+c.cvc)
		}
	}
	if regexp.MustCompile(`(?i)"cvc"\s*:`).MatchString(text) {
		found = append(found, `a "cvc" field`)
	}
	return found
}

func TestCardDataNeverStoredOrLogged(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "surgepay.db")
		db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, db)
		responses := cardTraffic(t, e)
		db.Close()
		checkResponses(t, responses)
		var files strings.Builder
		for _, suffix := range []string{"", "-wal", "-shm"} {
			b, _ := os.ReadFile(path + suffix)
			files.Write(b)
		}
		if files.Len() == 0 {
			t.Fatal("read no database bytes")
		}
		if l := leaks(files.String()); len(l) > 0 {
			t.Errorf("database files contain %v", l)
		}
		if l := leaks(e.logs.String()); len(l) > 0 || e.logs.String() == "" {
			t.Errorf("logs (%d bytes) contain %v", len(e.logs.String()), l)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		if testenv.PostgresURL(t) == "" {
			t.Skip("SURGEPAY_TEST_POSTGRES_URL not set")
		}
		db, schema := testenv.OpenPostgresSchema(t)
		e := newEnv(t, db)
		checkResponses(t, cardTraffic(t, e))
		dump := testenv.DumpPostgres(t, schema)
		if !strings.Contains(dump, "4242") && !strings.Contains(dump, "1111") {
			t.Fatalf("the dump holds no last4 at all; is it empty? %d bytes", len(dump))
		}
		if l := leaks(dump); len(l) > 0 {
			t.Errorf("PostgreSQL tables contain %v", l)
		}
		if l := leaks(e.logs.String()); len(l) > 0 {
			t.Errorf("logs contain %v", l)
		}
	})
}

// checkResponses fails if any response shows more of a card than brand
// and last4.
func checkResponses(t *testing.T, responses string) {
	t.Helper()
	if l := leaks(responses); len(l) > 0 {
		t.Errorf("responses contain %v", l)
	}
	if !strings.Contains(responses, `"last4":"1111"`) {
		t.Fatal("responses lack the card's last4; did the traffic run?")
	}
}
