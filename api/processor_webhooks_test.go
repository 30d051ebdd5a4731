package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/testenv"
)

// processorEventOverBytes is a processor webhook's body well over
// surgepay.ProcessorEventBytesMax, as a misbehaving sender might post.
const processorEventOverBytes = 9 << 20

// checkTooLarge checks an answer to a body over the limit: 413 with the
// API's JSON error body.
func checkTooLarge(t *testing.T, status int, body []byte) {
	t.Helper()
	var out struct {
		Error struct{ Type, Code, Message, Param string } `json:"error"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("the answer's body %q: %v", body, err)
	}
	if status != http.StatusRequestEntityTooLarge || out.Error.Code != "body_too_large" || out.Error.Param != "body" ||
		out.Error.Type == "" || out.Error.Message == "" {
		t.Fatalf("got %d %s, want 413 body_too_large on body", status, body)
	}
}

// TestProcessorWebhookBodyTooLargeHTTPClient: a processor webhook over the
// limit, posted by net/http's client over loopback, is answered 413 with
// a JSON error (it was 400).
func TestProcessorWebhookBodyTooLargeHTTPClient(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	resp, err := e.http.Post(e.url+"/v1/processor_webhooks/default", "application/json",
		bytes.NewReader(bytes.Repeat([]byte("a"), processorEventOverBytes)))
	if err != nil {
		t.Fatalf("got %v, want an answer", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: got %v, want it whole", err)
	}
	checkTooLarge(t, resp.StatusCode, body)
}

// TestProcessorWebhookBodyTooLargeNoReset: a client that writes its whole
// body before it reads the answer (as simple senders do) gets the 413;
// the server used to close the connection with the body unread, and the
// client's write failed (broken pipe, or a reset).
func TestProcessorWebhookBodyTooLargeNoReset(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/processor_webhooks/default HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		u.Host, processorEventOverBytes)
	if _, err := c.Write(bytes.Repeat([]byte("a"), processorEventOverBytes)); err != nil {
		t.Fatalf("writing the body: got %v, want it written", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: got %v, want one", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: got %v, want it whole", err)
	}
	checkTooLarge(t, resp.StatusCode, body)
	if !resp.Close {
		t.Fatalf("the answer does not close the connection; want Connection: close")
	}
}

// TestProcessorWebhookBodyAtLimit: a body of exactly the limit is read
// and verified (its signature does not: 400), not refused as too large.
func TestProcessorWebhookBodyAtLimit(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	resp, err := e.http.Post(e.url+"/v1/processor_webhooks/default", "application/json",
		bytes.NewReader(bytes.Repeat([]byte("a"), surgepay.ProcessorEventBytesMax)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("invalid_signature")) {
		t.Fatalf("got %d %s, want 400 invalid_signature", resp.StatusCode, body)
	}
}
