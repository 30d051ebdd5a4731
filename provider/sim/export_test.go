package sim

import "time"

// SetClock makes p stamp and age its records by now, starting from now():
// tests move time forward instead of sleeping. Call it before any call
// that stores a record.
func (p *Provider) SetClock(now func() time.Time) {
	p.now = now
	p.epoch = now()
}
