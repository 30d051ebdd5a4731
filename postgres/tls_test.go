package postgres_test

import (
	"context"
	"crypto/tls"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/tlstest"
	"github.com/surgepay/surgepay/postgres"
)

// snakeoilCert is the self-signed certificate of Debian's PostgreSQL
// packages (ssl = on, CN localhost), the local cluster's.
const snakeoilCert = "/etc/ssl/certs/ssl-cert-snakeoil.pem"

// tlsTracer records whether each query the store sends goes over TLS.
type tlsTracer struct {
	mu             sync.Mutex
	queries, plain int
	versionMin     uint16
}

func (tr *tlsTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.queries++
	tc, ok := conn.PgConn().Conn().(*tls.Conn)
	if !ok {
		tr.plain++
		return ctx
	}
	if v := tc.ConnectionState().Version; tr.versionMin == 0 || v < tr.versionMin {
		tr.versionMin = v
	}
	return ctx
}

func (tr *tlsTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// withParams returns the URL dsn with its query parameters set to params
// (and host replaced when host is not "").
func withParams(t *testing.T, dsn, host string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("SURGEPAY_TEST_POSTGRES_URL is not a URL: %v", err)
	}
	if host != "" {
		u.Host = host + ":" + u.Port()
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// TestStoreOverTLS: with sslmode=require in postgres.dsn every statement
// of the store (migrations, reads, group commits) goes over TLS 1.2 or
// newer. With the server's CA as sslrootcert, sslmode=verify-full checks
// the certificate; with another CA it is refused.
func TestStoreOverTLS(t *testing.T) {
	dsn := testDSN(t)
	open := func(t *testing.T, dsn string) (*postgres.DB, *tlsTracer, error) {
		tr := &tlsTracer{}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: newSchema(t), Tracer: tr})
		if err == nil {
			t.Cleanup(func() { db.Close() })
		}
		return db, tr, err
	}
	t.Run("Require", func(t *testing.T) {
		db, tr, err := open(t, withParams(t, dsn, "", map[string]string{"sslmode": "require"}))
		if err != nil {
			t.Fatalf("Open with sslmode=require: %v (is ssl = on in postgresql.conf?)", err)
		}
		ctx := context.Background()
		m := &surgepay.Merchant{ID: "mer_tls", Name: "TLS", Created: time.Now().UTC()}
		if err := db.Apply(ctx, &surgepay.Write{Merchant: m}); err != nil {
			t.Fatalf("Apply over TLS: %v", err)
		}
		if _, err := db.FindMerchant(ctx, m.ID); err != nil {
			t.Fatalf("FindMerchant over TLS: %v", err)
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if tr.queries == 0 || tr.plain > 0 || tr.versionMin < tls.VersionTLS12 {
			t.Errorf("%d statements, %d of them in plain TCP, oldest TLS version %x; want all over TLS 1.2+",
				tr.queries, tr.plain, tr.versionMin)
		}
	})
	t.Run("VerifyFull", func(t *testing.T) {
		if _, err := os.Stat(snakeoilCert); err != nil {
			t.Skipf("no %s: this PostgreSQL's CA is unknown here", snakeoilCert)
		}
		good := withParams(t, dsn, "localhost", map[string]string{"sslmode": "verify-full", "sslrootcert": snakeoilCert})
		if _, _, err := open(t, good); err != nil {
			if strings.Contains(err.Error(), "certificate") {
				t.Skipf("the server's certificate is not %s: %v", snakeoilCert, err)
			}
			t.Fatalf("Open with sslmode=verify-full and the server's CA: %v", err)
		}
		other := tlstest.NewCA(t, "not-the-server-ca")
		bad := withParams(t, dsn, "localhost", map[string]string{"sslmode": "verify-full", "sslrootcert": other.CertFile})
		if _, _, err := open(t, bad); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("Open with sslmode=verify-full and another CA: %v, want the server's certificate refused", err)
		}
	})
}
