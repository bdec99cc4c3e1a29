package main

// The JSON file `make bench` writes: the table's rows (bench/report), then
// each section's details, and where the figures were taken.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"adoption/bench/report"
)

// Results is what bench/results/bench-<date>.json holds: the table, then
// each section's own figures in detail.
type Results struct {
	Date     string         `json:"date"`
	Host     Host           `json:"host"`
	Note     string         `json:"note"`
	Rows     []report.Row   `json:"rows"`
	Skipped  []string       `json:"skipped,omitempty"`
	Errors   []string       `json:"errors,omitempty"`
	Sections map[string]any `json:"sections"`
}

// Host says where the figures were taken.
type Host struct {
	Kernel string   `json:"kernel"`
	CPUs   int      `json:"cpus"`
	Go     string   `json:"go"`
	Tools  []string `json:"tools"`
}

func hostInfo() Host {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return Host{Kernel: strings.TrimSpace(string(kernel)), CPUs: runtime.NumCPU(), Go: runtime.Version(), Tools: versions()}
}

func writeResults(dir string, res Results) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "bench-"+time.Now().Format("2006-01-02")+".json")
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false) // "&&" and "<" as they are
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return "", err
	}
	return file, os.WriteFile(file, js.Bytes(), 0o644)
}
