package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WebhookStat is a snapshot of webhook delivery: running totals of the
// attempts by outcome, and the outbox's last counted backlog.
type WebhookStat struct {
	Delivered, Retried, Failed, Dropped uint64
	Pending, FailedKept                 int
	OldestPendingAge                    time.Duration // 0 if none is pending
}

// RegisterWebhooks adds the webhook delivery metrics, read from stats at
// every scrape; stats must be cheap and safe for concurrent use (the
// dispatcher counts its backlog on its own schedule).
func (t *Telemetry) RegisterWebhooks(stats func() WebhookStat) error {
	if !t.MetricsEnabled() {
		return nil
	}
	return t.reg.Register(&webhookCollector{stats: stats,
		attempts: desc("webhook", "deliveries_total",
			"Webhook delivery attempts by outcome: delivered (2xx), retry (failed, attempted again later), "+
				"failed (no attempts left; kept), dropped (endpoint deleted).", "outcome"),
		backlog: desc("webhook", "backlog", "Webhook deliveries in the outbox by status (pending, failed).", "status"),
		oldest:  desc("webhook", "backlog_oldest_age_seconds", "Age of the oldest pending webhook delivery."),
	})
}

type webhookCollector struct {
	stats                     func() WebhookStat
	attempts, backlog, oldest *prometheus.Desc
}

func (c *webhookCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.attempts
	ch <- c.backlog
	ch <- c.oldest
}

func (c *webhookCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, v := range []struct {
		outcome string
		n       uint64
	}{{"delivered", s.Delivered}, {"retry", s.Retried}, {"failed", s.Failed}, {"dropped", s.Dropped}} {
		ch <- prometheus.MustNewConstMetric(c.attempts, prometheus.CounterValue, float64(v.n), v.outcome)
	}
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(s.Pending), "pending")
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(s.FailedKept), "failed")
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestPendingAge.Seconds())
}
