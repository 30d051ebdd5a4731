package stage

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/surgepay/surgepay"
)

func testInstruction() *surgepay.CaptureInstruction {
	return &surgepay.CaptureInstruction{PaymentID: "pay_01hzzzzzzzzzzzzzzzzzzzzzzz", MerchantID: "mer_01hyyyyyyyyyyyyyyyyyyyyyyy",
		Amount: 12345, Currency: "usd", AuthorizationRef: "auth_3f9a1c2e_k7q", IdempotencyKey: "pay_01hzzzzzzzzzzzzzzzzzzzzzzz/capture",
		Authorized: time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.UTC)}
}

func newPair(t testing.TB, opts ...SealerOption) (*Sealer, *Opener, []byte) {
	t.Helper()
	pub, priv, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSealer(pub, opts...)
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewOpener(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, o, pub
}

func TestSealOpen(t *testing.T) {
	s, o, _ := newPair(t)
	want := testInstruction()
	sealed, err := s.Seal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.Open(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Open (-want +got):\n%s", diff)
	}
	if s.KeyID() != o.KeyID() {
		t.Errorf("key IDs: sealer %s, opener %s", s.KeyID(), o.KeyID())
	}
}

// TestInstructionRoundTrip: what appendInstruction writes decodes to the
// same instruction, for the odd cases too (a key not derived from the
// payment, escapes and non-ASCII, a zone, the zero time, long strings).
func TestInstructionRoundTrip(t *testing.T) {
	cases := map[string]*surgepay.CaptureInstruction{"Plain": testInstruction(), "Zero": {}}
	key := testInstruction()
	key.IdempotencyKey = "pay_01hzzzzzzzzzzzzzzzzzzzzzzy/capture" // another payment's
	cases["OtherKey"] = key
	near := testInstruction()
	near.IdempotencyKey = near.PaymentID + "/capturf"
	cases["NearKey"] = near
	esc := testInstruction()
	esc.MerchantID, esc.AuthorizationRef = "mer_\"<&>\\\n", "réf\x00"
	cases["Escaped"] = esc
	loc := testInstruction()
	loc.Authorized = loc.Authorized.In(time.FixedZone("X", 3600+1800))
	cases["Zone"] = loc
	long := testInstruction()
	long.AuthorizationRef, long.Amount = strings.Repeat("r", 1000), -1<<62
	cases["Long"] = long
	old := testInstruction()
	old.Authorized = time.Date(1900, 1, 1, 0, 0, 0, 999_999_999, time.UTC)
	cases["Before1970"] = old
	for name, ins := range cases {
		t.Run(name, func(t *testing.T) {
			b := appendInstruction([]byte("prefix"), ins)
			if string(b[:6]) != "prefix" {
				t.Fatalf("appended over the prefix: %q", b[:6])
			}
			var got surgepay.CaptureInstruction
			if err := decodeInstruction(b[6:], &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ins, &got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
			if ins.Authorized.IsZero() != got.Authorized.IsZero() {
				t.Errorf("zero time %v decoded as %v", ins.Authorized, got.Authorized)
			}
			// Every truncation and any extra byte fail.
			for n := range len(b) - 6 {
				if err := decodeInstruction(b[6:6+n], &got); err == nil {
					t.Fatalf("truncated to %d of %d bytes: decoded", n, len(b)-6)
				}
			}
			if err := decodeInstruction(append(b[6:len(b):len(b)], 0), &got); err == nil {
				t.Fatal("a trailing byte decoded")
			}
		})
	}
}

// TestInstructionMalformed: a key form other than 0 or 1, nanoseconds of
// a second or more, and a string longer than what is left fail to decode.
func TestInstructionMalformed(t *testing.T) {
	ins := testInstruction()
	head := appendString(appendString(nil, ins.PaymentID), ins.MerchantID)
	head = binary.AppendVarint(head, ins.Amount)
	head = appendString(appendString(head, ins.Currency), ins.AuthorizationRef)
	for name, b := range map[string][]byte{
		"KeyForm":      binary.AppendUvarint(binary.AppendVarint(append(slices.Clip(head), 2), 1), 0),
		"Nanoseconds":  binary.AppendUvarint(binary.AppendVarint(append(slices.Clip(head), 0), 1), uint64(time.Second)),
		"StringLength": binary.AppendUvarint(nil, 1<<20),
		"Empty":        nil,
	} {
		var got surgepay.CaptureInstruction
		if err := decodeInstruction(b, &got); err == nil {
			t.Errorf("%s: decoded %+v", name, got)
		}
	}
	good := binary.AppendUvarint(binary.AppendVarint(append(slices.Clip(head), 0), 1), uint64(time.Second-1))
	var got surgepay.CaptureInstruction
	if err := decodeInstruction(good, &got); err != nil {
		t.Fatalf("the well-formed control: %v", err)
	}
}

// TestOpenVersion1: a record of the first format (a JSON instruction),
// as builds before version 2 staged, still opens, zone and all; and a
// sale's version 2 record is the smaller by the difference of the two.
func TestOpenVersion1(t *testing.T) {
	s, o, _ := newPair(t)
	s1, _, _ := newPair(t)
	s1.pub, s1.keyID, s1.version = s.pub, s.keyID, recordVersionJSON
	want := testInstruction()
	want.Authorized = want.Authorized.In(time.FixedZone("X", 3600))
	v1, err := s1.Seal(want)
	if err != nil {
		t.Fatal(err)
	}
	if v1[0] != recordVersionJSON {
		t.Fatalf("version %d, want %d", v1[0], recordVersionJSON)
	}
	got, err := o.Open(v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, off := got.Authorized.Zone(); cmp.Diff(want, got) != "" || off != 3600 {
		t.Errorf("Open of version 1 (-want +got):\n%s (zone offset %d s)", cmp.Diff(want, got), off)
	}
	v2, err := s.Seal(testInstruction())
	if err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(testInstruction())
	t.Logf("a sale's record: version 1 %d bytes (JSON %d), version 2 %d bytes", len(v1), len(j), len(v2))
	if v2[0] != recordVersion || len(v2) > RecordOverheadBytes+120 || len(v1)-len(v2) < len(j)-120 {
		t.Errorf("version %d record of %d bytes (version 1: %d, its JSON %d): want version %d, at most %d bytes",
			v2[0], len(v2), len(v1), len(j), recordVersion, RecordOverheadBytes+120)
	}
}

// TestOpenNeedsPrivateKey: nothing an API host has opens a record: not the
// public key used as a private key, not another settlement key pair.
func TestOpenNeedsPrivateKey(t *testing.T) {
	s, _, pub := newPair(t)
	sealed, err := s.Seal(testInstruction())
	if err != nil {
		t.Fatal(err)
	}
	_, otherPriv, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string][]byte{"PublicKey": pub, "OtherPrivateKey": otherPriv} {
		t.Run(name, func(t *testing.T) {
			o, err := NewOpener(key)
			if err != nil {
				return // refused outright: fine
			}
			if ins, err := o.Open(sealed); err == nil {
				t.Fatalf("opened with the %s: %+v", name, ins)
			}
			// Even with the key ID rewritten to the opener's, the wrapped
			// data key does not open.
			forged := append([]byte(nil), sealed...)
			id := keyID(o.priv.PublicKey().Bytes())
			copy(forged[1:], id[:])
			if ins, err := o.Open(forged); err == nil {
				t.Fatalf("opened a re-labelled record with the %s: %+v", name, ins)
			} else if !errors.Is(err, ErrTampered) {
				t.Errorf("got %v, want ErrTampered", err)
			}
		})
	}
	t.Run("WrongKeyError", func(t *testing.T) {
		o, _ := NewOpener(otherPriv)
		if _, err := o.Open(sealed); !errors.Is(err, ErrWrongKey) {
			t.Errorf("got %v, want ErrWrongKey", err)
		}
	})
}

// TestOpenAnyFlippedByte flips every bit position's byte of a record, with
// the segment key cached and not: every change fails to open.
func TestOpenAnyFlippedByte(t *testing.T) {
	s, o, _ := newPair(t)
	sealed, err := s.Seal(testInstruction())
	if err != nil {
		t.Fatal(err)
	}
	for _, cached := range []bool{true, false} {
		for i := range sealed {
			for _, mask := range []byte{0x01, 0x80} {
				if !cached {
					o.lru.Init()
					clear(o.cache)
				} else if _, err := o.Open(sealed); err != nil {
					t.Fatal(err)
				}
				bad := append([]byte(nil), sealed...)
				bad[i] ^= mask
				if ins, err := o.Open(bad); err == nil {
					t.Fatalf("cached=%v: byte %d ^ %#x opened: %+v", cached, i, mask, ins)
				}
			}
		}
	}
	for _, n := range []int{0, 1, headerBytes, len(sealed) - 1} {
		if _, err := o.Open(sealed[:n]); !errors.Is(err, ErrTampered) {
			t.Errorf("truncated to %d: got %v, want ErrTampered", n, err)
		}
	}
	if _, err := o.Open(append(sealed, 0)); !errors.Is(err, ErrTampered) {
		t.Errorf("extended: got %v, want ErrTampered", err)
	}
}

// TestSegmentSwap: the header of one segment spliced onto a record of
// another fails, both ways round.
func TestSegmentSwap(t *testing.T) {
	s, o, _ := newPair(t, WithSegmentRotation(1, 0))
	a, _ := s.Seal(testInstruction())
	b, _ := s.Seal(testInstruction())
	if string(a[:headerBytes]) == string(b[:headerBytes]) {
		t.Fatal("segment did not rotate after 1 record")
	}
	for _, r := range [][]byte{a, b} {
		if _, err := o.Open(r); err != nil {
			t.Fatal(err)
		}
	}
	mixed := append(append([]byte(nil), a[:headerBytes]...), b[headerBytes:]...)
	if _, err := o.Open(mixed); !errors.Is(err, ErrTampered) {
		t.Errorf("got %v, want ErrTampered", err)
	}
}

func TestSegmentRotation(t *testing.T) {
	s, o, _ := newPair(t, WithSegmentRotation(3, time.Hour))
	now := time.Now()
	s.now = func() time.Time { return now }
	headers := map[string]int{}
	for range 7 {
		r, err := s.Seal(testInstruction())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Open(r); err != nil {
			t.Fatal(err)
		}
		headers[string(r[:headerBytes])]++
	}
	if len(headers) != 3 {
		t.Errorf("by count: got %d segments for 7 records at 3 each, want 3", len(headers))
	}
	r1, _ := s.Seal(testInstruction())
	now = now.Add(2 * time.Hour)
	r2, _ := s.Seal(testInstruction())
	if string(r1[:headerBytes]) == string(r2[:headerBytes]) {
		t.Error("by age: segment older than its age limit was reused")
	}
}

func TestOpenerCacheBounded(t *testing.T) {
	s, o, _ := newPair(t, WithSegmentRotation(1, 0))
	for range OpenerSegmentsMax + 10 {
		r, _ := s.Seal(testInstruction())
		if _, err := o.Open(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := o.lru.Len(); got != OpenerSegmentsMax || len(o.cache) != OpenerSegmentsMax {
		t.Errorf("cache holds %d (map %d), want %d", got, len(o.cache), OpenerSegmentsMax)
	}
}

func TestSealConcurrent(t *testing.T) {
	s, o, _ := newPair(t, WithSegmentRotation(50, 0))
	var wg sync.WaitGroup
	seen := sync.Map{}
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				ins := testInstruction()
				ins.Amount = int64(g*1000 + i + 1)
				r, err := s.Seal(ins)
				if err != nil {
					t.Error(err)
					return
				}
				// (segment, nonce) must never repeat.
				if _, dup := seen.LoadOrStore(string(r[:headerBytes+nonceBytes]), true); dup {
					t.Error("nonce reused within a segment")
				}
				got, err := o.Open(r)
				if err != nil || got.Amount != ins.Amount {
					t.Errorf("Open: %v, amount %v want %d", err, got, ins.Amount)
				}
			}
		})
	}
	wg.Wait()
}

func TestKeyFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys") // made by WriteKeyFiles: 0700
	id, err := WriteKeyFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	pubPath, privPath := filepath.Join(dir, PublicKeyFile), filepath.Join(dir, PrivateKeyFile)
	for path, want := range map[string]os.FileMode{pubPath: 0o644, privPath: 0o600, dir: 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %o, want %o", path, fi.Mode().Perm(), want)
		}
	}
	pub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	if KeyID(pub) != id {
		t.Errorf("public key ID %s, want %s", KeyID(pub), id)
	}
	s, _ := NewSealer(pub)
	o, _ := NewOpener(priv)
	r, _ := s.Seal(testInstruction())
	if _, err := o.Open(r); err != nil {
		t.Fatalf("keys from files do not match: %v", err)
	}

	t.Run("ErrExists", func(t *testing.T) {
		if _, err := WriteKeyFiles(dir); err == nil {
			t.Error("overwrote existing key files")
		}
	})
	t.Run("ErrPrivateKeyReadable", func(t *testing.T) {
		if err := os.Chmod(privPath, 0o640); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Chmod(privPath, 0o600) }() // the temporary directory goes anyway
		if _, err := LoadPrivateKey(privPath); err == nil {
			t.Error("loaded a group-readable private key")
		}
	})
	t.Run("ErrWrongBlock", func(t *testing.T) {
		if _, err := LoadPublicKey(privPath); err == nil {
			t.Error("loaded the private key file as a public key")
		}
	})
	t.Run("Env", func(t *testing.T) {
		env := map[string]string{EnvPublicKey: base64.StdEncoding.EncodeToString(pub),
			EnvPrivateKey: base64.StdEncoding.EncodeToString(priv)}
		gotPub, err := PublicKeyFrom("/nonexistent", func(k string) string { return env[k] })
		if err != nil || string(gotPub) != string(pub) {
			t.Errorf("PublicKeyFrom env: %v", err)
		}
		gotPriv, err := PrivateKeyFrom("/nonexistent", func(k string) string { return env[k] })
		if err != nil || string(gotPriv) != string(priv) {
			t.Errorf("PrivateKeyFrom env: %v", err)
		}
		env[EnvPrivateKey] = "not base64!"
		if _, err := PrivateKeyFrom(privPath, func(k string) string { return env[k] }); err == nil {
			t.Error("accepted a malformed env key")
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	s, _, _ := newPair(b)
	ins := testInstruction()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Seal(ins); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSealParallel(b *testing.B) {
	s, _, _ := newPair(b)
	ins := testInstruction()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Seal(ins); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkOpen(b *testing.B) {
	s, o, _ := newPair(b)
	r, _ := s.Seal(testInstruction())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.Open(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenNewSegment is the cost of a cache miss: one HPKE open.
func BenchmarkOpenNewSegment(b *testing.B) {
	s, o, _ := newPair(b)
	r, _ := s.Seal(testInstruction())
	b.ReportAllocs()
	for b.Loop() {
		o.mu.Lock()
		o.lru.Init()
		clear(o.cache)
		o.mu.Unlock()
		if _, err := o.Open(r); err != nil {
			b.Fatal(err)
		}
	}
}
