// Package stage holds the staged-capture side of the streamlined path:
// sealing capture instructions to the settlement key (Sealer, Opener), the
// settlement key files, and the embedded stage consumer (Embedded), which
// reads staged records from a store with the surgepay.StagedStore
// capability. Package stage/jetstream is the production stage.
//
// # Sealing
//
// API hosts hold only the settlement public key: they can seal, never open.
// HPKE (RFC 9180: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM) costs
// an X25519 scalar multiplication, tens of microseconds, too much per
// record at thousands of sales per second. So a Sealer keeps a segment: a
// random 32-byte data key HPKE-sealed once to the public key. Each record
// is AES-256-GCM under the segment's data key and carries the segment
// header, so it opens on its own (records travel one by one through
// JetStream):
//
//	version (1) | key ID (8) | segment ID (16) | enc (32) | wrapped data key (48) | nonce (12) | AES-256-GCM(instruction)
//
// Version 2 (what Seal writes) has the instruction in a binary form
// (appendInstruction), ~100 bytes for a sale's; version 1 had its JSON,
// ~370 bytes, and still opens, so records staged by an older build settle.
// A settle older than version 2 leaves a version-2 record at the stage
// (ErrVersion): upgrade settle first.
//
// The first 105 bytes are the header; they are the AAD of the record, and
// version | key ID | segment ID is the AAD of the wrapped data key, so any
// modified byte fails to open. An Opener caches opened data keys by segment
// ID: one HPKE per segment, not per record.
//
// Limits: sealing gives confidentiality and integrity, not authenticity:
// whoever holds the public key can seal an instruction. Settlement
// therefore checks every instruction against the stored payment before it
// captures. And the Sealer must hold its live segment's data key to seal:
// whoever reads an API process's memory can open the records of that one
// segment (at most SegmentAgeMaxDefault or SegmentRecordsMaxDefault
// records: amounts, currencies, authorization references, never card
// data), not those of segments the Sealer has rotated away from.
package stage

import (
	"container/list"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
)

// Record format.
const (
	// recordVersion is the format Seal writes: a binary instruction.
	recordVersion = 2
	// recordVersionJSON is the first format, a JSON instruction; Open
	// reads it.
	recordVersionJSON = 1
	keyIDBytes        = 8
	segmentIDBytes    = 16
	encBytes          = 32 // X25519 encapsulated key
	dataKeyBytes      = 32 // AES-256
	wrappedBytes      = dataKeyBytes + 16
	nonceBytes        = 12
	tagBytes          = 16
	headerBytes       = 1 + keyIDBytes + segmentIDBytes + encBytes + wrappedBytes
	// RecordOverheadBytes is what sealing adds to the instruction.
	RecordOverheadBytes = headerBytes + nonceBytes + tagBytes
	// RecordBytesMax bounds a sealed record; an instruction is about a
	// hundred bytes.
	RecordBytesMax = 16 << 10
)

// Segment rotation defaults.
const (
	SegmentRecordsMaxDefault = 100_000
	SegmentAgeMaxDefault     = time.Minute
	// OpenerSegmentsMax bounds the data keys an Opener caches.
	OpenerSegmentsMax = 1024
)

// hpkeInfo binds the wrapped data keys to this use.
var hpkeInfo = []byte("surgepay stage segment v1")

// Errors of Open. Every error of Open wraps exactly one of them.
var (
	// ErrTampered: the record is malformed or was modified; it can never
	// open. Settlement never captures it and leaves it at the stage for an
	// operator (its cleartext fields cannot be trusted either).
	ErrTampered = errors.New("sealed record is malformed or was modified")
	// ErrWrongKey: the record was sealed to another settlement key. It is
	// not damaged: settle it with the matching private key.
	ErrWrongKey = errors.New("sealed record is for another settlement key")
	// ErrVersion: the record has a format this build does not know.
	ErrVersion = errors.New("sealed record has an unknown format version")
)

func suite() (hpke.KEM, hpke.KDF, hpke.AEAD) {
	return hpke.DHKEM(ecdh.X25519()), hpke.HKDFSHA256(), hpke.AES256GCM()
}

// KeyID returns the 16-hex-digit ID of a settlement public key: the first
// 8 bytes of its SHA-256. Records carry it, so a wrong private key is told
// apart from a damaged record.
func KeyID(pub []byte) string {
	id := keyID(pub)
	return hex.EncodeToString(id[:])
}

func keyID(pub []byte) [keyIDBytes]byte {
	sum := sha256.Sum256(pub)
	return [keyIDBytes]byte(sum[:keyIDBytes])
}

// GenerateKeys returns a new settlement key pair: the 32-byte X25519
// public key (for API hosts) and private key (for settlement only).
func GenerateKeys() (pub, priv []byte, err error) {
	kem, _, _ := suite()
	k, err := kem.GenerateKey()
	if err != nil {
		return nil, nil, fmt.Errorf("generate settlement key: %w", err)
	}
	priv, err = k.Bytes()
	if err != nil {
		return nil, nil, fmt.Errorf("generate settlement key: %w", err)
	}
	return k.PublicKey().Bytes(), priv, nil
}

// segment is one data key and its header.
type segment struct {
	header  [headerBytes]byte
	aead    cipher.AEAD
	n       atomic.Uint64 // records sealed; the nonce counter
	expires time.Time
}

// Sealer seals capture instructions to a settlement public key. Safe for
// concurrent use.
type Sealer struct {
	pub        hpke.PublicKey
	keyID      [keyIDBytes]byte
	recordsMax uint64
	ageMax     time.Duration
	now        func() time.Time
	version    byte // recordVersion; recordVersionJSON only in tests, for records of older builds

	mu  sync.Mutex // serialises rotation
	cur atomic.Pointer[segment]
}

var _ surgepay.Sealer = (*Sealer)(nil)

// SealerOption configures a Sealer.
type SealerOption func(*Sealer)

// WithSegmentRotation rotates the data key after recordsMax records or
// ageMax, whichever comes first (defaults: SegmentRecordsMaxDefault,
// SegmentAgeMaxDefault).
func WithSegmentRotation(recordsMax int, ageMax time.Duration) SealerOption {
	return func(s *Sealer) {
		if recordsMax > 0 {
			s.recordsMax = uint64(recordsMax)
		}
		if ageMax > 0 {
			s.ageMax = ageMax
		}
	}
}

// NewSealer returns a Sealer for the 32-byte settlement public key pub.
func NewSealer(pub []byte, opts ...SealerOption) (*Sealer, error) {
	kem, _, _ := suite()
	pk, err := kem.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("settlement public key: %w", err)
	}
	s := &Sealer{pub: pk, keyID: keyID(pub), recordsMax: SegmentRecordsMaxDefault,
		ageMax: SegmentAgeMaxDefault, now: time.Now, version: recordVersion}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// KeyID returns the ID of the public key records are sealed to.
func (s *Sealer) KeyID() string { return hex.EncodeToString(s.keyID[:]) }

// Seal returns ins sealed to the settlement public key. It costs one
// AES-256-GCM of about a hundred bytes; once per segment it also costs one
// HPKE seal.
func (s *Sealer) Seal(ins *surgepay.CaptureInstruction) ([]byte, error) {
	seg, n, err := s.segment()
	if err != nil {
		return nil, err
	}
	out := make([]byte, headerBytes+nonceBytes, headerBytes+nonceBytes+160+tagBytes)
	copy(out, seg.header[:])
	nonce := out[headerBytes : headerBytes+nonceBytes]
	binary.BigEndian.PutUint64(nonce[4:], n) // unique per data key
	if s.version == recordVersionJSON {
		j, err := json.Marshal(ins)
		if err != nil {
			return nil, fmt.Errorf("seal capture of %s: %w", ins.PaymentID, err)
		}
		out = append(out, j...)
	} else {
		out = appendInstruction(out, ins)
	}
	out = slices.Grow(out, tagBytes)
	nonce = out[headerBytes : headerBytes+nonceBytes]
	plain := out[headerBytes+nonceBytes:]
	// Seal in place: the plaintext is overwritten by the ciphertext.
	sealed := seg.aead.Seal(plain[:0], nonce, plain, seg.header[:])
	out = out[:headerBytes+nonceBytes+len(sealed)]
	if len(out) > RecordBytesMax {
		return nil, fmt.Errorf("seal capture of %s: %d bytes exceeds %d", ins.PaymentID, len(out), RecordBytesMax)
	}
	return out, nil
}

// segment returns the current segment and a fresh nonce counter in it,
// rotating when the segment is full or old.
func (s *Sealer) segment() (*segment, uint64, error) {
	if seg := s.cur.Load(); seg != nil {
		if n := seg.n.Add(1); n <= s.recordsMax && s.now().Before(seg.expires) {
			return seg, n, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seg := s.cur.Load(); seg != nil { // another caller may have rotated
		if n := seg.n.Add(1); n <= s.recordsMax && s.now().Before(seg.expires) {
			return seg, n, nil
		}
	}
	seg, err := s.newSegment()
	if err != nil {
		return nil, 0, err
	}
	n := seg.n.Add(1)
	s.cur.Store(seg)
	return seg, n, nil
}

func (s *Sealer) newSegment() (*segment, error) {
	_, kdf, aead := suite()
	seg := &segment{expires: s.now().Add(s.ageMax)}
	h := seg.header[:]
	h[0] = s.version
	copy(h[1:], s.keyID[:])
	segID := h[1+keyIDBytes : 1+keyIDBytes+segmentIDBytes]
	rand.Read(segID)
	var dataKey [dataKeyBytes]byte
	rand.Read(dataKey[:])
	enc, sender, err := hpke.NewSender(s.pub, kdf, aead, hpkeInfo)
	if err != nil {
		return nil, fmt.Errorf("seal segment key: %w", err)
	}
	wrapped, err := sender.Seal(h[:1+keyIDBytes+segmentIDBytes], dataKey[:])
	if err != nil {
		return nil, fmt.Errorf("seal segment key: %w", err)
	}
	if len(enc) != encBytes || len(wrapped) != wrappedBytes {
		panic(fmt.Sprintf("stage: HPKE sizes %d, %d; want %d, %d", len(enc), len(wrapped), encBytes, wrappedBytes))
	}
	copy(h[1+keyIDBytes+segmentIDBytes:], enc)
	copy(h[1+keyIDBytes+segmentIDBytes+encBytes:], wrapped)
	if seg.aead, err = newGCM(dataKey[:]); err != nil {
		return nil, err
	}
	return seg, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Opener opens sealed capture instructions with the settlement private
// key. It caches up to OpenerSegmentsMax opened data keys (least recently
// used evicted first). Safe for concurrent use.
type Opener struct {
	priv  hpke.PrivateKey
	keyID [keyIDBytes]byte

	mu    sync.Mutex
	cache map[[segmentIDBytes]byte]*list.Element
	lru   list.List // of *openSegment, most recent first
}

type openSegment struct {
	id     [segmentIDBytes]byte
	header [headerBytes]byte
	aead   cipher.AEAD
}

var _ surgepay.Opener = (*Opener)(nil)

// NewOpener returns an Opener for the 32-byte settlement private key.
func NewOpener(priv []byte) (*Opener, error) {
	kem, _, _ := suite()
	k, err := kem.NewPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("settlement private key: %w", err)
	}
	return &Opener{priv: k, keyID: keyID(k.PublicKey().Bytes()),
		cache: make(map[[segmentIDBytes]byte]*list.Element)}, nil
}

// KeyID returns the ID of the key pair this Opener opens.
func (o *Opener) KeyID() string { return hex.EncodeToString(o.keyID[:]) }

// Open returns the instruction in sealed. Its errors wrap ErrTampered,
// ErrWrongKey or ErrVersion.
func (o *Opener) Open(sealed []byte) (*surgepay.CaptureInstruction, error) {
	if len(sealed) < RecordOverheadBytes || len(sealed) > RecordBytesMax {
		return nil, fmt.Errorf("open: %d bytes: %w", len(sealed), ErrTampered)
	}
	if sealed[0] != recordVersion && sealed[0] != recordVersionJSON {
		return nil, fmt.Errorf("open: version %d: %w", sealed[0], ErrVersion)
	}
	header := [headerBytes]byte(sealed[:headerBytes])
	if got := [keyIDBytes]byte(header[1 : 1+keyIDBytes]); got != o.keyID {
		return nil, fmt.Errorf("open: record key %x, this key %x: %w", got, o.keyID, ErrWrongKey)
	}
	aead, err := o.dataKey(&header)
	if err != nil {
		return nil, err
	}
	nonce := sealed[headerBytes : headerBytes+nonceBytes]
	plain, err := aead.Open(nil, nonce, sealed[headerBytes+nonceBytes:], header[:])
	if err != nil {
		return nil, fmt.Errorf("open record: %w", ErrTampered)
	}
	var ins surgepay.CaptureInstruction
	if header[0] == recordVersionJSON {
		err = json.Unmarshal(plain, &ins)
	} else {
		err = decodeInstruction(plain, &ins)
	}
	if err != nil {
		// Authentic but unreadable: a sealer bug, never captured.
		return nil, fmt.Errorf("open record: decode: %v: %w", err, ErrTampered)
	}
	if ins.PaymentID == "" || ins.MerchantID == "" || ins.IdempotencyKey == "" || ins.AuthorizationRef == "" || ins.Amount <= 0 {
		return nil, fmt.Errorf("open record: incomplete instruction: %w", ErrTampered)
	}
	return &ins, nil
}

// dataKey returns the segment's AEAD, opening the wrapped key with HPKE
// on a cache miss. A cached segment is used only for a byte-identical
// header.
func (o *Opener) dataKey(header *[headerBytes]byte) (cipher.AEAD, error) {
	id := [segmentIDBytes]byte(header[1+keyIDBytes:])
	o.mu.Lock()
	if e, ok := o.cache[id]; ok {
		seg := e.Value.(*openSegment)
		if seg.header == *header {
			o.lru.MoveToFront(e)
			o.mu.Unlock()
			return seg.aead, nil
		}
	}
	o.mu.Unlock()

	_, kdf, aead := suite()
	off := 1 + keyIDBytes + segmentIDBytes
	r, err := hpke.NewRecipient(header[off:off+encBytes], o.priv, kdf, aead, hpkeInfo)
	if err != nil {
		return nil, fmt.Errorf("open segment key: %v: %w", err, ErrTampered)
	}
	key, err := r.Open(header[:off], header[off+encBytes:])
	if err != nil {
		return nil, fmt.Errorf("open segment key: %w", ErrTampered)
	}
	g, err := newGCM(key)
	if err != nil {
		return nil, fmt.Errorf("open segment key: %v: %w", err, ErrTampered)
	}
	o.put(&openSegment{id: id, header: *header, aead: g})
	return g, nil
}

func (o *Opener) put(seg *openSegment) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.cache[seg.id]; ok {
		e.Value = seg
		o.lru.MoveToFront(e)
		return
	}
	o.cache[seg.id] = o.lru.PushFront(seg)
	for o.lru.Len() > OpenerSegmentsMax {
		old := o.lru.Back()
		o.lru.Remove(old)
		delete(o.cache, old.Value.(*openSegment).id)
	}
}

// captureKeySuffix makes the capture's idempotency key of every
// streamlined sale: its payment ID and this (engine.recordStreamlined).
const captureKeySuffix = "/capture"

// appendInstruction appends ins in record version 2's form: each string
// as its length (uvarint) and bytes, the amount as a varint, the capture's
// idempotency key as one byte 0 when it is PaymentID+"/capture" (every
// sale's) or 1 and the string, and the authorization time as Unix
// seconds (varint) and nanoseconds (uvarint), which opens in UTC. A
// sale's instruction takes ~100 bytes where its JSON took ~370: the
// embedded stage's row was the largest a sale wrote.
func appendInstruction(b []byte, ins *surgepay.CaptureInstruction) []byte {
	b = appendString(b, ins.PaymentID)
	b = appendString(b, ins.MerchantID)
	b = binary.AppendVarint(b, ins.Amount)
	b = appendString(b, ins.Currency)
	b = appendString(b, ins.AuthorizationRef)
	if k := ins.IdempotencyKey; len(k) == len(ins.PaymentID)+len(captureKeySuffix) &&
		strings.HasPrefix(k, ins.PaymentID) && strings.HasSuffix(k, captureKeySuffix) {
		b = append(b, 0)
	} else {
		b = appendString(append(b, 1), k)
	}
	b = binary.AppendVarint(b, ins.Authorized.Unix())
	return binary.AppendUvarint(b, uint64(ins.Authorized.Nanosecond())) //nolint:gosec // G115: Nanosecond is 0..999999999
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeInstruction reads what appendInstruction wrote, all of it and
// nothing more.
func decodeInstruction(b []byte, ins *surgepay.CaptureInstruction) error {
	d := decoder{b: b}
	ins.PaymentID = d.str()
	ins.MerchantID = d.str()
	ins.Amount = d.varint()
	ins.Currency = d.str()
	ins.AuthorizationRef = d.str()
	switch d.flag() {
	case 0:
		ins.IdempotencyKey = ins.PaymentID + captureKeySuffix
	case 1:
		ins.IdempotencyKey = d.str()
	default:
		d.fail("idempotency key form")
	}
	sec, nsec := d.varint(), d.uvarint()
	if d.err == nil && nsec >= uint64(time.Second) {
		d.fail("nanoseconds")
	}
	ins.Authorized = time.Unix(sec, int64(nsec)).UTC() //nolint:gosec // G115: nsec < 1e9 is checked above
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d bytes after the instruction", len(d.b)))
	}
	return d.err
}

// decoder reads a version 2 instruction; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = errors.New("malformed " + what)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 { return number(d, binary.Uvarint) }

func (d *decoder) varint() int64 { return number(d, binary.Varint) }

// number reads one varint of either sign with read (binary.Uvarint or
// binary.Varint).
func number[T uint64 | int64](d *decoder, read func([]byte) (T, int)) T {
	v, n := read(d.b)
	if n <= 0 {
		d.fail("number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) flag() byte {
	if len(d.b) == 0 {
		d.fail("instruction: short")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("string length")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
