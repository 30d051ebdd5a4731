// Package jetstream is the production stage of the streamlined path: staged
// capture records in a NATS JetStream stream with work-queue retention,
// file storage and message-ID de-duplication, consumed by settlement
// through a durable pull consumer with explicit acknowledgement.
//
// A record is one message: the sealed instruction is the payload; its ID
// is the Nats-Msg-Id (a repeated Put within the Duplicates window is
// stored once); merchant, payment and creation time ride in headers.
//
// Limits: Put returns once the stream's leader has stored the record and,
// with Replicas > 1, a quorum has it. A single server (Replicas 1) writes
// the record to its file store but fsyncs on its own schedule (nats-server
// sync_interval, 2 minutes by default): for durability against power loss
// on one node set sync_interval: always, or run 3 replicas. The stream is
// bounded (MaxMsgs, MaxBytes) and discards NEW records when full, so a full
// stage refuses sales (the engine's stage fallback) instead of dropping
// staged captures.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sony/gobreaker/v2"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/liveness"
	"github.com/surgepay/surgepay/stage"
)

// Defaults.
const (
	StreamDefault         = "SURGEPAY_STAGE"
	SubjectDefault        = "surgepay.stage.captures"
	DurableDefault        = "settle"
	ReplicasDefault       = 1
	MaxAckPendingDefault  = 10_000
	AckWaitDefault        = time.Minute
	PublishTimeoutDefault = 5 * time.Second
	HungAfterDefault      = time.Second
	DuplicatesDefault     = 2 * time.Minute
	// MaxMsgsDefault and MaxBytesDefault bound the stream: 8 GiB is ~20 M
	// staged captures of ~400 bytes, twice a half hour at 5,000 sales/s.
	// Each server holding a replica reserves MaxBytes of its file store
	// when the stream is made, and refuses it ("insufficient storage
	// resources") if its store is smaller: a server's store is 75 % of
	// its free disk unless set, so 20 GiB (the default before) needed
	// over 27 GiB free, and failed on smaller volumes.
	MaxMsgsDefault  = 20_000_000
	MaxBytesDefault = 8 << 30
	connectTimeout  = 5 * time.Second
	// BreakerFailuresMax consecutive failed Puts open the stage's breaker:
	// Puts then fail at once (the engine's stage fallback takes the sale)
	// for BreakerOpenDuration, after which one Put tries the stage again.
	// A Put while the NATS connection is down fails at once too, without
	// waiting for PublishTimeout.
	BreakerFailuresMax  = 3
	BreakerOpenDuration = 5 * time.Second
	fetchMaxLimit       = 10_000
)

// Headers of a record's message.
const (
	HeaderMerchant = "Surgepay-Merchant"
	HeaderPayment  = "Surgepay-Payment"
	HeaderCreated  = "Surgepay-Created" // RFC 3339 with nanoseconds
)

// Config configures the stage. Zero values take the defaults.
type Config struct {
	URL     string // NATS server URL(s), comma separated. Required.
	Stream  string // default "SURGEPAY_STAGE"
	Subject string // default "surgepay.stage.captures"
	// Replicas of the stream: 1 for one server, 3 for a cluster. Default 1.
	Replicas int
	// Durable is the settlement consumer's name. Default "settle".
	Durable string
	// MaxAckPending bounds records delivered and not yet acknowledged.
	// Default 10,000.
	MaxAckPending int
	// AckWait is how long a delivered record waits for its acknowledgement
	// before it is delivered again: after a settlement crash, its records
	// come back after AckWait. It must exceed the time settlement may take
	// over one batch (see settle.AckWaitMin), or records are delivered
	// again while settle still works on them (harmless, wasted). It is a
	// setting of the durable consumer: the settlement process that starts
	// last sets it for all. Default 1m.
	AckWait time.Duration
	// PublishTimeout bounds one Put. Default 5s.
	PublishTimeout time.Duration
	// HungAfter is how long the NATS server may leave a ping unanswered
	// on an open connection before the stage takes it as hung: Puts in
	// flight are cancelled and new ones fail at once (the engine's stage
	// fallback takes the sale) until a ping is answered. A server that is
	// stopped or frozen keeps its connections open and answers nothing,
	// which neither the connection state nor the breaker (it needs
	// BreakerFailuresMax Puts to wait PublishTimeout each) notices in
	// time. Default HungAfterDefault (1s); negative: no watch.
	HungAfter time.Duration
	// Duplicates is the de-duplication window of record IDs. Default 2m.
	Duplicates time.Duration
	// MaxMsgs and MaxBytes bound the stream; when full, Put fails.
	// Defaults 20,000,000 and 8 GiB (see MaxBytesDefault).
	MaxMsgs  int64
	MaxBytes int64
	// CredsFile is a NATS credentials file (a user JWT and its NKey seed,
	// as `nsc` writes it), for servers with decentralized auth.
	CredsFile string
	// User and Password authenticate to a server that lists users; Token
	// to one with an authorization token. Secrets: never printed. At most
	// one of CredsFile, User with Password, and Token; none: the URL's
	// own user:password@ or token@, if any.
	User, Password string
	Token          string
	// TLSCAFile is a PEM file of the certificates that sign the server's;
	// when set the connection requires TLS and trusts only them (without
	// it, a tls:// URL or a server that requires TLS is checked against
	// the system's roots). TLSCertFile and TLSKeyFile are a client
	// certificate, both or neither, for servers that verify clients.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// Options are extra NATS connection options, applied after those
	// above.
	Options []nats.Option
}

// connectOptions returns the NATS options of the credentials and TLS
// settings, or an error if they contradict each other.
func (c *Config) connectOptions() ([]nats.Option, error) {
	ways := 0
	for _, set := range []bool{c.CredsFile != "", c.User != "" || c.Password != "", c.Token != ""} {
		if set {
			ways++
		}
	}
	switch {
	case ways > 1:
		return nil, errors.New("jetstream stage: set one of the credentials file, user and password, or token")
	case (c.User == "") != (c.Password == ""):
		return nil, errors.New("jetstream stage: user and password go together")
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return nil, errors.New("jetstream stage: the TLS client certificate and key files go together")
	}
	var opts []nats.Option
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(c.TLSCAFile))
	}
	if c.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(c.TLSCertFile, c.TLSKeyFile))
	}
	return opts, nil
}

func (c *Config) defaults() error {
	if c.URL == "" {
		return errors.New("jetstream stage: URL is required")
	}
	str := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	str(&c.Stream, StreamDefault)
	str(&c.Subject, SubjectDefault)
	str(&c.Durable, DurableDefault)
	num := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	num(&c.MaxMsgs, MaxMsgsDefault)
	num(&c.MaxBytes, MaxBytesDefault)
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	dur(&c.AckWait, AckWaitDefault)
	dur(&c.PublishTimeout, PublishTimeoutDefault)
	dur(&c.Duplicates, DuplicatesDefault)
	if c.HungAfter == 0 {
		c.HungAfter = HungAfterDefault
	}
	if c.Replicas == 0 {
		c.Replicas = ReplicasDefault
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = MaxAckPendingDefault
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("jetstream stage: replicas %d must be 1 to 5", c.Replicas)
	}
	if c.MaxAckPending < 1 || c.MaxAckPending > 1_000_000 {
		return fmt.Errorf("jetstream stage: max_ack_pending %d must be 1 to 1000000", c.MaxAckPending)
	}
	return nil
}

// Stage is a JetStream stage: Put for API hosts, and the settlement
// consumer (Fetch, Ack, Backlog), created on first use. Safe for
// concurrent use.
type Stage struct {
	cfg    Config
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream

	consOnce sync.Once
	cons     jetstream.Consumer
	consErr  error

	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]

	// live is the watch's verdict (see Config.HungAfter): Puts run under
	// its Bound.
	live      *liveness.Watch
	stopWatch context.CancelFunc // nil without a watch
	watchDone chan struct{}

	mu        sync.Mutex
	delivered map[string]delivery // record ID → its latest delivery, until acknowledged
}

type delivery struct {
	msg jetstream.Msg
	at  time.Time
}

var (
	_ surgepay.Stage         = (*Stage)(nil)
	_ surgepay.StageConsumer = (*Stage)(nil)
	_ stage.Releaser         = (*Stage)(nil)
)

// Open connects to NATS and creates or updates the stream.
func Open(ctx context.Context, cfg Config) (*Stage, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	auth, err := cfg.connectOptions()
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{nats.Name("surgepay stage"), nats.Timeout(connectTimeout),
		nats.MaxReconnects(-1)}, auth...)
	opts = append(opts, cfg.Options...)
	// The connection holds the secrets now; the Stage keeps no copy.
	cfg.Password, cfg.Token = "", ""
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("jetstream stage: connect %s: %w (is nats-server running with -js?)", redactURL(cfg.URL), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream stage: %w", err)
	}
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: cfg.Stream, Subjects: []string{cfg.Subject}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Replicas: cfg.Replicas, Duplicates: cfg.Duplicates,
		MaxMsgs: cfg.MaxMsgs, MaxBytes: cfg.MaxBytes, Discard: jetstream.DiscardNew,
		MaxMsgSize: stage.RecordBytesMax + 1024, Description: "surgepay staged captures"})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream stage: stream %s: %w", cfg.Stream, err)
	}
	br := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "stage",
		MaxRequests: 1,
		Timeout:     BreakerOpenDuration,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= BreakerFailuresMax },
		// A client that went away says nothing about the stage.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
	})
	st := &Stage{cfg: cfg, nc: nc, js: js, stream: stream, breaker: br, delivered: map[string]delivery{}}
	st.live = liveness.New(errHung, nil, nil)
	if cfg.HungAfter > 0 {
		var wctx context.Context
		wctx, st.stopWatch = context.WithCancel(context.Background())
		st.watchDone = make(chan struct{})
		// A ping answered (PONG) within the rest of HungAfter: the server
		// is up; a connection that is down fails at once.
		go func() { defer close(st.watchDone); st.live.Run(wctx, cfg.HungAfter, st.nc.FlushWithContext) }()
	}
	return st, nil
}

// errHung cancels the Puts in flight when the server is found hung.
var errHung = errors.New("jetstream stage: the NATS server does not answer pings")

// Close closes the connection. Records fetched and neither acknowledged
// nor released are delivered again after AckWait.
func (s *Stage) Close() error {
	if s.stopWatch != nil {
		s.stopWatch()
		<-s.watchDone
	}
	s.nc.Close()
	return nil
}

// Put publishes rec with its ID as the message ID and returns once
// JetStream has stored it. A repeated ID within the Duplicates window is
// stored once.
//
// Put fails at once, without waiting for PublishTimeout, while the NATS
// connection is down (the client reconnects in the background), while the
// server leaves pings unanswered (Config.HungAfter), and while
// the breaker is open after BreakerFailuresMax failed Puts in a row: a
// sale then takes the stage fallback in microseconds instead of holding
// its client for seconds.
func (s *Stage) Put(ctx context.Context, rec *surgepay.StagedRecord) error {
	if !s.nc.IsConnected() {
		return stageDown(rec, "the NATS connection is down (reconnecting)")
	}
	if s.live.Down() {
		return stageDown(rec, "the NATS server does not answer pings (hung)")
	}
	done, err := s.breaker.Allow()
	if err != nil {
		return stageDown(rec, "the stage failed repeatedly; its breaker is open")
	}
	err = s.publish(ctx, rec)
	done(err)
	if err != nil {
		return stageDown(rec, err.Error())
	}
	return nil
}

func stageDown(rec *surgepay.StagedRecord, why string) error {
	return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "stage_unavailable", RetryAfter: 1,
		Message: fmt.Sprintf("stage record %s: %s", rec.ID, why)}
}

func (s *Stage) publish(ctx context.Context, rec *surgepay.StagedRecord) error {
	// A hang found by the watch ends the wait at once.
	ctx, done := s.live.Bound(ctx)
	defer done()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	m := nats.NewMsg(s.cfg.Subject)
	m.Data = rec.Sealed
	m.Header.Set(jetstream.MsgIDHeader, rec.ID)
	m.Header.Set(HeaderMerchant, rec.MerchantID)
	m.Header.Set(HeaderPayment, rec.PaymentID)
	m.Header.Set(HeaderCreated, rec.Created.UTC().Format(time.RFC3339Nano))
	_, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectStream(s.cfg.Stream))
	return err
}

func (s *Stage) consumer(ctx context.Context) (jetstream.Consumer, error) {
	s.consOnce.Do(func() {
		s.cons, s.consErr = s.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: s.cfg.Durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.cfg.AckWait,
			MaxAckPending: s.cfg.MaxAckPending, MaxDeliver: -1, FilterSubject: s.cfg.Subject,
			DeliverPolicy: jetstream.DeliverAllPolicy, Description: "surgepay settlement"})
		if s.consErr != nil {
			s.consErr = fmt.Errorf("jetstream stage: consumer %s: %w", s.cfg.Durable, s.consErr)
		}
	})
	return s.cons, s.consErr
}

// Fetch returns up to max records, waiting at most wait (at least 1ms)
// for the first. Records already waiting are taken at once, by pulls that
// do not wait; only when none is waiting does it wait, for one.
func (s *Stage) Fetch(ctx context.Context, n int, wait time.Duration) ([]*surgepay.StagedRecord, error) {
	if n < 1 || n > fetchMaxLimit {
		return nil, fmt.Errorf("jetstream stage: fetch max %d must be 1 to %d", n, fetchMaxLimit)
	}
	cons, err := s.consumer(ctx)
	if err != nil {
		return nil, err
	}
	// Why not one Fetch(n, wait): it waits out wait unless n records come,
	// and on nats-server 2.9 a pull whose expiry ends while the server is
	// still delivering ends only at the client's own timeout, a second
	// later (a 10ms pull of 2,000 waiting records took 1.02s; one that
	// does not wait, 4ms).
	recs, err := s.pull(cons.FetchNoWait(n))
	if err != nil || len(recs) > 0 {
		return recs, err
	}
	recs, err = s.pull(cons.Fetch(1, jetstream.FetchMaxWait(max(wait, time.Millisecond))))
	if err != nil || len(recs) == 0 || n == 1 {
		return recs, err
	}
	more, err := s.pull(cons.FetchNoWait(n - 1))
	return append(recs, more...), err
}

// pull takes the records of a pull's batch.
func (s *Stage) pull(batch jetstream.MessageBatch, err error) ([]*surgepay.StagedRecord, error) {
	if err != nil {
		return nil, fmt.Errorf("jetstream stage: fetch: %w", err)
	}
	return s.take(batch)
}

// take turns the messages of batch into records, remembering each
// delivery for Ack and Release.
func (s *Stage) take(batch jetstream.MessageBatch) ([]*surgepay.StagedRecord, error) {
	now := time.Now()
	var recs []*surgepay.StagedRecord
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(now)
	for m := range batch.Messages() {
		rec := record(m)
		if rec.ID == "" {
			// Not a record: a stray publish on the subject. Ack it away.
			_ = m.Term()
			continue
		}
		_, again := s.delivered[rec.ID]
		s.delivered[rec.ID] = delivery{msg: m, at: now}
		if again && slices.ContainsFunc(recs, func(r *surgepay.StagedRecord) bool { return r.ID == rec.ID }) {
			continue // redelivered within this fetch (AckWait shorter than wait): once is enough
		}
		recs = append(recs, rec)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && len(recs) == 0 {
		return nil, fmt.Errorf("jetstream stage: fetch: %w", err)
	}
	return recs, nil
}

// pruneLocked forgets deliveries older than AckWait: the server delivers
// them again, and an Ack of a forgotten delivery is simply not sent.
func (s *Stage) pruneLocked(now time.Time) {
	for id, d := range s.delivered {
		if now.Sub(d.at) > s.cfg.AckWait {
			delete(s.delivered, id)
		}
	}
}

func record(m jetstream.Msg) *surgepay.StagedRecord {
	h := m.Headers()
	rec := &surgepay.StagedRecord{ID: h.Get(jetstream.MsgIDHeader), MerchantID: h.Get(HeaderMerchant),
		PaymentID: h.Get(HeaderPayment), Sealed: m.Data()}
	if t, err := time.Parse(time.RFC3339Nano, h.Get(HeaderCreated)); err == nil {
		rec.Created = t
	} else if md, err := m.Metadata(); err == nil {
		rec.Created = md.Timestamp
	}
	return rec
}

// Ack acknowledges recs: the work queue removes them. Every
// acknowledgement but the last is sent without waiting; the last waits for
// the server's confirmation (AckSync). The consumer processes a
// connection's acknowledgements in order, so when Ack returns the stream
// no longer holds recs: one round trip for the batch, not one per record.
// A record whose delivery is forgotten (answered already, or older than
// AckWait) is skipped; an acknowledgement lost on the way only lets the
// record come back, and settlement finds it settled.
func (s *Stage) Ack(ctx context.Context, recs []*surgepay.StagedRecord) error {
	msgs := s.forget(recs)
	if len(msgs) == 0 {
		return nil
	}
	var errs []error
	for _, m := range msgs[:len(msgs)-1] {
		if err := m.Ack(); err != nil {
			errs = append(errs, err)
		}
	}
	ctx, cancel := s.replyContext(ctx)
	defer cancel()
	if err := msgs[len(msgs)-1].DoubleAck(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("jetstream stage: ack: %w", err)
	}
	return nil
}

// Release hands recs back to the stream, to be delivered again after
// delay instead of after AckWait (a negative acknowledgement with that
// delay; 0: at once). It returns once the server has received them.
func (s *Stage) Release(ctx context.Context, recs []*surgepay.StagedRecord, delay time.Duration) error {
	var errs []error
	for _, m := range s.forget(recs) {
		var err error
		if delay <= 0 {
			err = m.Nak()
		} else {
			err = m.NakWithDelay(delay)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	ctx, cancel := s.replyContext(ctx)
	defer cancel()
	if err := s.nc.FlushWithContext(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("jetstream stage: release: %w", err)
	}
	return nil
}

// forget returns the latest delivery of each of recs still remembered,
// and forgets them: each is answered once.
func (s *Stage) forget(recs []*surgepay.StagedRecord) []jetstream.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs := make([]jetstream.Msg, 0, len(recs))
	for _, r := range recs {
		if d, ok := s.delivered[r.ID]; ok {
			msgs = append(msgs, d.msg)
			delete(s.delivered, r.ID)
		}
	}
	return msgs
}

// replyContext bounds a wait for the server by PublishTimeout, unless ctx
// has a deadline.
func (s *Stage) replyContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.PublishTimeout)
}

// AckWait returns the consumer's AckWait: how long a delivered record
// waits for its acknowledgement before it is delivered again.
func (s *Stage) AckWait() time.Duration { return s.cfg.AckWait }

// Backlog returns the records in the stream (delivered or not) and the
// time the oldest was stored.
func (s *Stage) Backlog(ctx context.Context) (int, time.Time, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("jetstream stage: stream info: %w", err)
	}
	var oldest time.Time
	if info.State.Msgs > 0 {
		oldest = info.State.FirstTime
	}
	return int(info.State.Msgs), oldest, nil //nolint:gosec // G115: the stream's MaxMsgs keeps the count far below MaxInt
}

// redactURL drops user information (credentials) from NATS URLs for messages.
func redactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		if at := strings.LastIndex(u, "@"); at >= 0 {
			scheme := ""
			if j := strings.Index(u, "://"); j >= 0 && j < at {
				scheme = u[:j+3]
			}
			parts[i] = scheme + "<redacted>@" + u[at+1:]
		}
	}
	return strings.Join(parts, ",")
}
