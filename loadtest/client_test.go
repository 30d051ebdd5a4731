package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestRequestTimeoutCoversHeadersAndBody: --timeout ends a request whose
// answer never starts and one whose body stalls after its headers, each
// counted as "timeout"; a request answered within it is not.
func TestRequestTimeoutCoversHeadersAndBody(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/silent":
		case "/stalled-body":
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(`{"id":`))
			w.(http.Flusher).Flush()
		default:
			w.Write([]byte(`{"id":"pay_1","status":"succeeded"}`))
			return
		}
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stop)
	cl := newClient(srv.URL, "", 200*time.Millisecond, 10, nil)
	defer cl.close()
	for _, path := range []string{"/silent", "/stalled-body"} {
		var reply apiReply
		status, transport, _ := cl.send(context.Background(), &call{method: http.MethodGet, path: path}, &reply)
		if status != 0 || transport != "timeout" {
			t.Errorf("%s: status %d, transport error %q; want 0, \"timeout\"", path, status, transport)
		}
	}
	var reply apiReply
	status, transport, _ := cl.send(context.Background(), &call{method: http.MethodGet, path: "/ok"}, &reply)
	if status != http.StatusOK || transport != "" || reply.ID != "pay_1" {
		t.Errorf("/ok: status %d, transport error %q, reply %+v; want 200 and pay_1", status, transport, reply)
	}
}
