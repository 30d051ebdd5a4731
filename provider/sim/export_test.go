package sim

import (
	"errors"
	"time"
)

// SetClock makes p stamp and age its records by now, starting from now():
// tests move time forward instead of sleeping. Call it before any call
// that stores a record.
func (p *Provider) SetClock(now func() time.Time) {
	p.now = now
	p.epoch = now()
}

// SetChallengesMax makes p hold at most n 3-D Secure challenges (its
// shards' shares, at least one each), instead of ChallengesMax. Call it
// before any challenge starts.
func (p *Provider) SetChallengesMax(n int) {
	for i := range p.shards {
		p.shards[i].challenges.max = max(1, n/shardCount)
	}
}

// ShardCount is the number of shards, whose shares make up the bounds.
const ShardCount = shardCount

// CompleteChallenge completes the challenge named id as its page's form
// would, and returns its state then: "pending", "authenticated",
// "failed", "abandoned" or "cancelled".
func CompleteChallenge(p *Provider, id string, authenticate bool) (string, error) {
	v, ok := p.challengeAt(id, true, authenticate)
	if !ok {
		return "", errors.New("no such challenge")
	}
	return [...]string{"pending", "authenticated", "failed", "abandoned", "cancelled"}[v.state], nil
}
