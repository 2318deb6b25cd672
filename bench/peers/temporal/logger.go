package main

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
)

// sdkLog is the SDK client's and worker's logger: it drops debug and info,
// and tallies warnings and errors (a timed-out workflow task, a failed
// poll) so a slow outlier in the figures can be explained.
type sdkLog struct {
	*peerkit.Tally
}

func (l *sdkLog) Debug(string, ...any) {}
func (l *sdkLog) Info(string, ...any)  {}
func (l *sdkLog) Warn(msg string, kv ...any) {
	l.Add(false, fmt.Sprintf("%s %s %v", "WARN", msg, kv))
}
func (l *sdkLog) Error(msg string, kv ...any) {
	l.Add(true, fmt.Sprintf("%s %s %v", "ERROR", msg, kv))
}
