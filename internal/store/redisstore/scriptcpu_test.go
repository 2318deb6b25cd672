package redisstore

import (
	"strconv"
	"strings"
	"testing"
)

// reportScriptCPU reports Redis's own CPU per EVALSHA call (commandstats).
func reportScriptCPU(b *testing.B, s *Store) {
	info, err := s.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_evalsha:")), ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				x, _ := strconv.ParseFloat(v, 64)
				b.ReportMetric(x, "redis-µs/commit")
			}
		}
	}
}
