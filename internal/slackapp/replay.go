package slackapp

import (
	"sync"
	"time"
)

// replayCache remembers the signatures of the interactions accepted,
// each until the request's timestamp leaves Slack's five-minute window
// (after which the signature check refuses it anyway), so a request
// captured and sent again inside the window is refused. It holds at most
// bound signatures; when that many are still live it takes no more
// (fails closed: the caller answers 503) rather than forget one that
// could then be replayed.
type replayCache struct {
	mu    sync.Mutex
	bound int
	until map[string]time.Time
}

func newReplayCache(bound int) *replayCache {
	return &replayCache{bound: max(bound, 1), until: map[string]time.Time{}}
}

// Replay outcomes.
const (
	replayFresh = iota // first sight: now remembered
	replaySeen         // accepted before, still inside the window
	replayFull         // bound reached with live entries: not taken
)

// add records key as seen until until, unless it was seen already.
func (c *replayCache) add(key string, now, until time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u, ok := c.until[key]; ok && now.Before(u) {
		return replaySeen
	}
	if len(c.until) >= c.bound {
		for k, u := range c.until {
			if !now.Before(u) {
				delete(c.until, k)
			}
		}
		if len(c.until) >= c.bound {
			return replayFull
		}
	}
	c.until[key] = until
	return replayFresh
}

func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.until)
}
