package peerkit

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// Machine is the report's "machine": GOOS, GOARCH, the CPUs and
// GOMAXPROCS, and the CPU's model name.
func Machine() map[string]any {
	return map[string]any{
		"goos": runtime.GOOS, "goarch": runtime.GOARCH,
		"num_cpu": runtime.NumCPU(), "gomaxprocs": runtime.GOMAXPROCS(0),
		"cpu": cpuModel(),
	}
}

// cpuModel is /proc/cpuinfo's first model name ("" if none).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// LoadAvg is /proc/loadavg's 1-, 5- and 15-minute figures ("" if
// unreadable): the machine is shared, so the report says how busy it was.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// Versions is the report's "versions": "go", the Go version, and for each
// module path in names that the binary was built with, names[path], its
// version (the replacement's, when replaced).
func Versions(names map[string]string) map[string]string {
	v := map[string]string{"go": runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if name, ok := names[d.Path]; ok {
				if d.Replace != nil {
					d = d.Replace
				}
				v[name] = d.Version
			}
		}
	}
	return v
}

// WriteReport writes doc as indented JSON, with a final newline, to
// jsonPath, then markdown() to mdPath; an empty path is skipped, "-" is
// stdout.
func WriteReport(jsonPath string, doc any, mdPath string, markdown func() string) error {
	if jsonPath != "" {
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := output(jsonPath, append(b, '\n')); err != nil {
			return err
		}
	}
	if mdPath != "" {
		if err := output(mdPath, []byte(markdown())); err != nil {
			return err
		}
	}
	return nil
}

func output(path string, b []byte) error {
	if path == "-" {
		_, err := os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// FmtRate is a rate in whole units, with a thousands comma: "5,012", "873".
func FmtRate(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%d,%03d", int(v)/1000, int(v)%1000)
	}
	return fmt.Sprintf("%.0f", v)
}
