package main

import (
	"fmt"
	"sync"
)

// sdkLog is the SDK client's and worker's logger: it drops debug and info,
// and keeps warnings and errors (a timed-out workflow task, a failed poll)
// so a slow outlier in the figures can be explained.
type sdkLog struct {
	key      string
	cfg      config
	mu       sync.Mutex
	warnings int
	errors   int
	first    []string
}

const keepLines = 5

func (l *sdkLog) Debug(string, ...any) {}
func (l *sdkLog) Info(string, ...any)  {}
func (l *sdkLog) Warn(msg string, kv ...any) {
	l.keep(&l.warnings, "WARN", msg, kv)
}
func (l *sdkLog) Error(msg string, kv ...any) {
	l.keep(&l.errors, "ERROR", msg, kv)
}

func (l *sdkLog) keep(n *int, level, msg string, kv []any) {
	line := fmt.Sprintf("%s %s %v", level, msg, kv)
	l.mu.Lock()
	*n++
	keep := len(l.first) < keepLines
	if keep {
		l.first = append(l.first, line)
	}
	l.mu.Unlock()
	if keep {
		progress(l.cfg, "%s: sdk: %s", l.key, line)
	}
}

func (l *sdkLog) counts() (warnings, errors int, first []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.warnings, l.errors, append([]string(nil), l.first...)
}
