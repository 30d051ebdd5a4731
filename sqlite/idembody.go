package sqlite

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Stored answers of idempotency keys are S2 blocks (Snappy's successor)
// against a dictionary: a sale's answer is ~700 bytes of JSON whose keys
// and most values repeat from one sale to the next, so the dictionary (the
// shape of a sale's answer) takes it to ~210 bytes (bench/RESULTS.md,
// issue 14), about a fifth of what the database stores and writes per
// sale, in ~2 µs (zstd with the same dictionary took 7 µs, most of it
// resetting its tables). A compressed body is bodyMark, the dictionary's
// ID, then the block; bodies stored before (JSON, which never starts with a
// zero byte) are read as they are.
//
// The encoder keeps its 64 KiB hash table on its goroutine's stack, so it
// runs on goroutines of its own (bodyCompressors), never on a request's:
// there it grew every request goroutine's stack to 128 KiB (41 MiB of
// stacks at 2,500 sales/s, 482 MiB in the backlog after a 2 s stall at
// 3,000/s), and the growth, undone by each garbage collection, tripled the
// cost of a compression (bench/RESULTS.md, issue 14, session 12).

// bodyMark starts a compressed body.
const bodyMark = 0x00

// bodyDictID names bodyDict in every compressed body. The dictionary of a
// stored body must stay readable forever: a better dictionary takes a new
// ID, and decompressBody keeps every old one.
const bodyDictID = 1

// bodyDict is the shape of a sale's answer (the API's payment object).
const bodyDict = `{"id":"pay_","object":"payment","status":"succeeded","amount":,"amount_tax":0,"amount_total":,` +
	`"amount_capturable":0,"amount_captured":,"amount_refunded":0,"currency":"usd","capture_method":"automatic",` +
	`"customer":"cus_","payment_method":"pm_","description":"","metadata":{},"tax":null,"transactions":[{"id":"txn_",` +
	`"type":"authorization","status":"succeeded","amount":,"provider_reference":"auth_","created":},{"id":"txn_",` +
	`"type":"capture","status":"pending","amount":,"created":}],"created":}`

// bodyCompressMin is the shortest body worth compressing.
const bodyCompressMin = 64

// bodyDecodedMax bounds a decoded body: far above any answer (a request
// body is at most 64 KiB, an answer smaller than a list page).
const bodyDecodedMax = 16 << 20

var bodyDicts = sync.OnceValue(func() map[byte]*s2.Dict {
	return map[byte]*s2.Dict{bodyDictID: s2.MakeDict([]byte(bodyDict), nil)}
})

// bodyCompressorsMax bounds the goroutines that compress stored answers:
// one per processor (GOMAXPROCS) up to this many. A caller waits for a free
// one, which is backpressure of a few microseconds.
const bodyCompressorsMax = 8

// compressJob is one body handed to a compressor, with its answer.
type compressJob struct {
	body, out []byte
	done      chan struct{}
}

var compressJobs = sync.Pool{New: func() any { return &compressJob{done: make(chan struct{}, 1)} }}

// bodyCompressors starts the compressor goroutines once and returns their
// queue. They live as long as the process: idle, each is a parked
// goroutine with its grown stack.
var bodyCompressors = sync.OnceValue(func() chan<- *compressJob {
	jobs := make(chan *compressJob)
	for range min(runtime.GOMAXPROCS(0), bodyCompressorsMax) {
		go func() {
			for j := range jobs {
				j.out = compressOrKeep(j.body)
				j.done <- struct{}{}
			}
		}()
	}
	return jobs
})

// compressOrKeep is compressBody, or body itself should the encoder panic:
// on a compressor goroutine a panic would end the process, where on the
// request's it failed one request (a body is stored as it is when it does
// not compress, and read back the same).
func compressOrKeep(body []byte) (out []byte) {
	defer func() {
		if recover() != nil {
			out = body
		}
	}()
	return compressBody(body)
}

// storedBody returns body as stored (compressBody), compressed on a
// compressor goroutine so that the caller's stack stays small.
func storedBody(body []byte) []byte {
	if len(body) < bodyCompressMin {
		return body
	}
	j := compressJobs.Get().(*compressJob)
	j.body = body
	bodyCompressors() <- j
	<-j.done
	out := j.out
	j.body, j.out = nil, nil
	compressJobs.Put(j)
	return out
}

// compressBody returns body as stored: compressed when that is shorter.
// Its encoder needs 64 KiB of stack; callers outside tests use storedBody.
// It encodes into a scratch buffer and returns a copy of the exact size:
// the answer is kept until its sale commits, and s2's bound on the encoded
// length is three times what an answer compresses to.
func compressBody(body []byte) []byte {
	if len(body) < bodyCompressMin {
		return body
	}
	n := s2.MaxEncodedLen(len(body))
	var dst []byte
	if n <= bodyScratchKeepMax {
		scratch := bodyScratch.Get().(*[]byte)
		defer bodyScratch.Put(scratch)
		if cap(*scratch) < n {
			*scratch = make([]byte, bodyScratchKeepMax)
		}
		dst = (*scratch)[:n]
	} else {
		dst = make([]byte, n)
	}
	enc := bodyDicts()[bodyDictID].Encode(dst, body)
	if len(enc)+2 >= len(body) {
		return body
	}
	out := make([]byte, 2+len(enc))
	out[0], out[1] = bodyMark, bodyDictID
	copy(out[2:], enc)
	return out
}

// bodyScratch holds compressBody's scratch buffers (*[]byte) of
// bodyScratchKeepMax bytes, one per compressor at most at a time; a
// longer answer (rare: a page of a list) gets a buffer of its own.
var bodyScratch = sync.Pool{New: func() any { return new([]byte) }}

const bodyScratchKeepMax = 16 << 10

// decompressBody returns the answer stored as b.
func decompressBody(b []byte) ([]byte, error) {
	if len(b) == 0 || b[0] != bodyMark {
		return b, nil
	}
	if len(b) < 2 {
		return nil, fmt.Errorf("stored answer of %d bytes: truncated", len(b))
	}
	d, ok := bodyDicts()[b[1]]
	if !ok {
		return nil, fmt.Errorf("stored answer compressed with unknown dictionary %d", b[1])
	}
	if n, err := s2.DecodedLen(b[2:]); err != nil || n > bodyDecodedMax {
		return nil, fmt.Errorf("stored answer: bad length (%d, %v)", n, err)
	}
	out, err := d.Decode(nil, b[2:])
	if err != nil {
		return nil, fmt.Errorf("decompress stored answer: %w", err)
	}
	return out, nil
}
