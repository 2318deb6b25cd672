package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// redisStats is what redis-server has done so far, from INFO: each
// command's calls and microseconds (commandstats; commands a script
// calls count too), and the bytes it has written to its clients
// (pub/sub deliveries included).
type redisStats struct {
	cmds     map[string]cmdStat
	outBytes int64
}

type cmdStat struct{ calls, usec int64 }

func (w *world) redisStats() (redisStats, error) {
	st := redisStats{cmds: map[string]cmdStat{}}
	info, err := w.redis.Info("commandstats")
	if err != nil {
		return st, err
	}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var c cmdStat
		for f := range strings.SplitSeq(v, ",") {
			key, val, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(val, 10, 64)
			switch key {
			case "calls":
				c.calls = n
			case "usec":
				c.usec = n
			}
		}
		st.cmds[name] = c
	}
	stats, err := w.redis.Info("stats")
	if err != nil {
		return st, err
	}
	st.outBytes, _ = strconv.ParseInt(stats["total_net_output_bytes"], 10, 64)
	return st, nil
}

// hintSubscribers is how many clients are subscribed to pub/sub channels
// (the store's hint channel: one per replica).
func (w *world) hintSubscribers() (int64, error) {
	chans, err := w.redis.Do("PUBSUB", "CHANNELS")
	if err != nil || chans == "" {
		return 0, err
	}
	reply, err := w.redis.Do(append([]string{"PUBSUB", "NUMSUB"}, strings.Split(chans, "\n")...)...)
	if err != nil {
		return 0, err
	}
	f := strings.Split(reply, "\n")
	var n int64
	for i := 1; i < len(f); i += 2 {
		k, _ := strconv.ParseInt(f[i], 10, 64)
		n += k
	}
	return n, nil
}

// redisPerRun records in extra, per run of runs, what Redis did between
// before and after: commands, PUBLISHes (hints), script calls and their
// cost, bytes sent; and says in words which commands took its time.
func redisPerRun(before, after redisStats, runs int, extra map[string]float64) string {
	type row struct {
		name        string
		calls, usec int64
	}
	var rows []row
	var calls int64
	for name, a := range after.cmds {
		b := before.cmds[name]
		r := row{name, a.calls - b.calls, a.usec - b.usec}
		if r.calls <= 0 {
			continue
		}
		rows = append(rows, r)
		calls += r.calls
	}
	n := float64(runs)
	extra["redis_calls_per_run"] = float64(calls) / n
	extra["redis_out_bytes_per_run"] = float64(after.outBytes-before.outBytes) / n
	slices.SortFunc(rows, func(a, b row) int { return int(b.usec - a.usec) })
	var parts []string
	for _, r := range rows {
		switch r.name {
		case "publish", "evalsha":
			extra["redis_"+r.name+"_per_run"] = float64(r.calls) / n
			extra["redis_"+r.name+"_us_per_call"] = float64(r.usec) / float64(r.calls)
		}
		if len(parts) < 5 {
			parts = append(parts, fmt.Sprintf("%s %.2f calls %.0f µs", strings.ToUpper(r.name), float64(r.calls)/n, float64(r.usec)/n))
		}
	}
	return "Redis per run (commandstats; what a script calls counts as well, and inside EVALSHA's time): " + strings.Join(parts, ", ")
}
