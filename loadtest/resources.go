package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicksPerSecond is Linux's USER_HZ, the unit of utime and stime in
// /proc/PID/stat. It is 100 on every mainstream architecture; reading it
// needs sysconf, which needs cgo.
const clockTicksPerSecond = 100

// metricsBytesMax bounds a Prometheus scrape.
const metricsBytesMax = 4 << 20

// procValues are one reading of a process: cumulative CPU seconds,
// resident set size, cumulative bytes it caused to be written to storage
// (-1 when unknown), the Go heap allocations it has made (0 when not
// scraped), and the surgepay server's writer gauges (nil when not
// scraped).
type procValues struct {
	cpu        float64
	rss        int64
	writeBytes int64
	allocs     int64
	writer     *WriterSample
}

// sampler reads a process's cumulative CPU seconds and resident set size.
type sampler interface {
	sample(ctx context.Context) (procValues, error)
}

// procSampler reads /proc/PID/stat and /proc/PID/io; pid "self" is the
// injector.
type procSampler struct{ pid string }

func (p procSampler) sample(context.Context) (procValues, error) {
	b, err := os.ReadFile("/proc/" + p.pid + "/stat")
	if err != nil {
		return procValues{}, err
	}
	cpu, rss, err := parseProcStat(string(b))
	if err != nil {
		return procValues{}, err
	}
	v := procValues{cpu: cpu, rss: rss, writeBytes: -1}
	// /proc/PID/io needs the process's owner (or root); without it the
	// run goes on without bytes written.
	if b, err := os.ReadFile("/proc/" + p.pid + "/io"); err == nil {
		v.writeBytes = parseProcIOWriteBytes(string(b))
	}
	return v, nil
}

// parseProcIOWriteBytes returns write_bytes from /proc/PID/io: the bytes
// the process caused to be sent to storage (page cache write-back
// included, WAL and checkpoints alike), or -1.
func parseProcIOWriteBytes(s string) int64 {
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// dirBytes returns the total size of the regular files under dir, walking
// at most dirEntriesMax entries.
func dirBytes(dir string) (int64, error) {
	var n int64
	seen := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if seen++; seen > dirEntriesMax {
			return fmt.Errorf("data dir %s: more than %d entries", dir, dirEntriesMax)
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return nil // removed meanwhile (a checkpoint's temporary file)
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// parseProcStat reads utime, stime and rss from a /proc/PID/stat line. The
// command name may contain spaces and parentheses, so fields are counted
// from the last ')'.
func parseProcStat(s string) (float64, int64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime 15, rss 24.
	if len(f) < 22 {
		return 0, 0, fmt.Errorf("proc stat: %d fields", len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	rss, err3 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, fmt.Errorf("proc stat: bad number")
	}
	return float64(utime+stime) / clockTicksPerSecond, rss * int64(os.Getpagesize()), nil
}

// promSampler scrapes process_cpu_seconds_total and
// process_resident_memory_bytes from a Prometheus text endpoint, and a
// surgepay server's writer gauges if it has them.
type promSampler struct {
	url    string
	client *http.Client
	token  string // the admin token, sent as a bearer token if set
}

func (p promSampler) sample(ctx context.Context) (procValues, error) {
	m, err := p.scrape(ctx)
	if err != nil {
		return procValues{}, err
	}
	if m.found&promProcess != promProcess {
		return procValues{}, fmt.Errorf("scrape: process_cpu_seconds_total or process_resident_memory_bytes missing")
	}
	return procValues{cpu: m.cpu, rss: int64(m.rss), writeBytes: -1, allocs: m.allocs(), writer: m.writer()}, nil
}

func (p promSampler) scrape(ctx context.Context) (promValues, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return promValues{}, err
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return promValues{}, err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only: closing loses nothing
	if resp.StatusCode != http.StatusOK {
		return promValues{}, fmt.Errorf("scrape %s: status %d", p.url, resp.StatusCode)
	}
	return parseProm(io.LimitReader(resp.Body, metricsBytesMax))
}

// procAndPromSampler reads the process from /proc (CPU, RSS, bytes
// written) and the server's writer gauges from its Prometheus endpoint
// (--server-pid with --server-metrics). A failed scrape leaves the
// sample without writer gauges: a server too busy to answer one is what
// the run is measuring.
type procAndPromSampler struct {
	proc procSampler
	prom promSampler
}

func (p procAndPromSampler) sample(ctx context.Context) (procValues, error) {
	v, err := p.proc.sample(ctx)
	if err != nil {
		return v, err
	}
	if m, err := p.prom.scrape(ctx); err == nil {
		v.writer, v.allocs = m.writer(), m.allocs()
	}
	return v, nil
}

// promValues are the metrics parseProm looks for; found says which.
type promValues struct {
	cpu, rss, stall, queue, mallocs float64
	shed                            map[string]int64 // surgepay_http_requests_shed_total by reason
	found                           int
}

const (
	promCPU = 1 << iota
	promRSS
	promStall
	promQueue
	promMallocs
	promProcess = promCPU | promRSS
)

// allocs returns go_memstats_mallocs_total (the heap objects a Go process
// has allocated), or 0 if the endpoint has none (not a Go process).
func (m promValues) allocs() int64 {
	if m.found&promMallocs == 0 {
		return 0
	}
	return int64(m.mallocs)
}

// writer returns the writer gauges, or nil if the endpoint has none (not
// a surgepay server, or a store without a group-commit writer).
func (m promValues) writer() *WriterSample {
	if m.found&promStall == 0 {
		return nil
	}
	return &WriterSample{StallSeconds: m.stall, QueueDepth: int64(m.queue), Shed: m.shed}
}

// parseProm finds the process metrics and surgepay's writer gauges in
// Prometheus text format.
func parseProm(r io.Reader) (promValues, error) {
	var m promValues
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			continue
		}
		switch name {
		case "process_cpu_seconds_total":
			m.cpu, m.found = v, m.found|promCPU
		case "process_resident_memory_bytes":
			m.rss, m.found = v, m.found|promRSS
		case "surgepay_groupcommit_stall_seconds":
			m.stall, m.found = v, m.found|promStall
		case "surgepay_groupcommit_queue_depth":
			m.queue, m.found = v, m.found|promQueue
		case "go_memstats_mallocs_total":
			m.mallocs, m.found = v, m.found|promMallocs
		default:
			if reason, ok := strings.CutPrefix(name, `surgepay_http_requests_shed_total{reason="`); ok {
				if m.shed == nil {
					m.shed = map[string]int64{}
				}
				m.shed[strings.TrimSuffix(reason, `"}`)] = int64(v)
			}
		}
	}
	return m, sc.Err()
}

// resourceMonitor samples the server and the injector every
// ResourceSampleInterval. Its sample slices are read after done is closed.
type resourceMonitor struct {
	start        time.Time
	server       sampler // nil when neither --server-pid nor --server-metrics is set
	serverSource string
	dataDir      string // --server-data-dir: its size is sampled with the server
	injector     sampler
	done         chan struct{}

	serverSamples   []ResourceSample
	injectorSamples []ResourceSample
	hostSamples     []HostSample
	serverErr       error
}

func newResourceMonitor(cfg *Config, start time.Time) *resourceMonitor {
	m := &resourceMonitor{start: start, injector: procSampler{"self"}, dataDir: cfg.ServerDataDir, done: make(chan struct{})}
	var prom promSampler
	if cfg.ServerMetricsURL != "" {
		tc, _ := cfg.clientTLS() // checked by Validate
		prom = promSampler{cfg.ServerMetricsURL, &http.Client{Timeout: ResourceSampleInterval / 2,
			Transport: &http.Transport{TLSClientConfig: tc}}, cfg.ServerMetricsToken}
	}
	switch {
	case cfg.ServerMetricsURL != "" && cfg.ServerPID > 0:
		m.server = procAndPromSampler{procSampler{strconv.Itoa(cfg.ServerPID)}, prom}
		m.serverSource = "proc"
	case cfg.ServerMetricsURL != "":
		m.server = prom
		m.serverSource = "prometheus"
	case cfg.ServerPID > 0:
		m.server = procSampler{strconv.Itoa(cfg.ServerPID)}
		m.serverSource = "proc"
	}
	return m
}

// loop samples until ctx ends.
func (m *resourceMonitor) loop(ctx context.Context) {
	defer close(m.done)
	var server, injector cpuTracker
	tick := time.NewTicker(ResourceSampleInterval)
	defer tick.Stop()
	var host hostTracker
	server.prime(ctx, m.server)
	injector.prime(ctx, m.injector)
	host.next(0) // primes it
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			second := int(now.Sub(m.start) / WindowDuration)
			if s, ok := host.next(second); ok {
				m.hostSamples = append(m.hostSamples, s)
			}
			if s, err := injector.next(ctx, m.injector, now, second); err == nil {
				m.injectorSamples = append(m.injectorSamples, s)
			}
			if m.server == nil {
				continue
			}
			s, err := server.next(ctx, m.server, now, second)
			if err != nil {
				m.serverErr = err
				continue
			}
			if m.dataDir != "" {
				if s.DataDirBytes, err = dirBytes(m.dataDir); err != nil {
					m.serverErr = err
				}
			}
			m.serverSamples = append(m.serverSamples, s)
		}
	}
}

// cpuTracker turns cumulative CPU seconds into a percentage of one core.
type cpuTracker struct {
	cpu  float64
	at   time.Time
	have bool
}

func (c *cpuTracker) prime(ctx context.Context, s sampler) {
	if s == nil {
		return
	}
	if v, err := s.sample(ctx); err == nil {
		c.cpu, c.at, c.have = v.cpu, time.Now(), true
	}
}

func (c *cpuTracker) next(ctx context.Context, s sampler, now time.Time, second int) (ResourceSample, error) {
	v, err := s.sample(ctx)
	if err != nil {
		return ResourceSample{}, err
	}
	out := ResourceSample{Second: second, RSSBytes: v.rss, WriteBytes: v.writeBytes, Allocs: v.allocs, Writer: v.writer}
	if c.have {
		if wall := now.Sub(c.at).Seconds(); wall > 0 {
			out.CPUPercent = max(v.cpu-c.cpu, 0) / wall * 100
		}
	}
	c.cpu, c.at, c.have = v.cpu, now, true
	return out, nil
}

// hostTracker turns /proc/stat's cumulative CPU times into HostSamples.
type hostTracker struct {
	prev procCPU
	have bool
}

// next reads /proc/stat and returns the second since the last read;
// false on the first read, or where /proc/stat cannot be read.
func (h *hostTracker) next(second int) (HostSample, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return HostSample{}, false
	}
	cur, ok := parseProcCPU(string(b))
	if !ok {
		return HostSample{}, false
	}
	prev, had := h.prev, h.have
	h.prev, h.have = cur, true
	if !had {
		return HostSample{}, false
	}
	return hostSampleOf(second, prev, cur)
}

// procCPU is the machine's cumulative CPU time in ticks, from the "cpu"
// line of /proc/stat: all of it, idle (with I/O wait) and stolen.
type procCPU struct{ total, idle, steal uint64 }

// parseProcCPU reads the first line of /proc/stat: "cpu  user nice
// system idle iowait irq softirq steal guest guest_nice" (guest time is
// counted in user already).
func parseProcCPU(s string) (procCPU, bool) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return procCPU{}, false
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return procCPU{}, false
		}
		v[i] = n
	}
	c := procCPU{idle: v[3] + v[4], steal: v[7]}
	for _, n := range v {
		c.total += n
	}
	return c, true
}

// hostSampleOf is the HostSample between two readings; false if no time
// passed between them.
func hostSampleOf(second int, prev, cur procCPU) (HostSample, bool) {
	if cur.total <= prev.total {
		return HostSample{}, false
	}
	total := float64(cur.total - prev.total)
	steal := float64(cur.steal - min(prev.steal, cur.steal))
	idle := float64(cur.idle - min(prev.idle, cur.idle))
	return HostSample{Second: second, StealPercent: steal / total * 100,
		BusyPercent: max(total-idle-steal, 0) / total * 100}, true
}

// summarizeHost reduces host samples to a summary; nil if there are none.
func summarizeHost(samples []HostSample) *HostSummary {
	if len(samples) == 0 {
		return nil
	}
	out := &HostSummary{Samples: len(samples), StealMaxSecond: samples[0].Second}
	var steal, busy float64
	for _, s := range samples {
		steal += s.StealPercent
		busy += s.BusyPercent
		if s.StealPercent > out.StealPercentMax {
			out.StealPercentMax, out.StealMaxSecond = s.StealPercent, s.Second
		}
	}
	out.StealPercentAvg = steal / float64(len(samples))
	out.BusyPercentAvg = busy / float64(len(samples))
	return out
}

// summarizeResources reduces samples to a summary.
func summarizeResources(source string, samples []ResourceSample) ResourceSummary {
	out := ResourceSummary{Source: source, Samples: len(samples)}
	var sum float64
	for _, s := range samples {
		sum += s.CPUPercent
		out.CPUPercentMax = max(out.CPUPercentMax, s.CPUPercent)
		out.RSSBytesMax = max(out.RSSBytesMax, s.RSSBytes)
		out.RSSBytesLast = s.RSSBytes
	}
	if len(samples) > 0 {
		out.CPUPercentAvg = sum / float64(len(samples))
	}
	return out
}
