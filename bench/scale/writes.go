package scale

// This file counts the server's writes: the persistence requests that
// change its stores (executions, history, tasks, task queues, visibility),
// read from the server's own Prometheus counters (persistence_requests and
// visibility_persistence_requests by operation). The idle window's count,
// per node and hour, is what an idle adopted node costs a cluster's
// database, heartbeats and timers included, whatever the histories show.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// readOps are the prefixes of the operations that only read.
var readOps = []string{"Get", "List", "Read", "Scan", "Count", "Describe", "Assert"}

// isWrite says whether a persistence operation changes a store.
func isWrite(op string) bool {
	for _, p := range readOps {
		if strings.HasPrefix(op, p) {
			return false
		}
	}
	return true
}

// writeCounters are the server's write requests so far, by operation.
func (s *devServer) writeCounters(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metrics, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the server's metrics (%s): %w", s.metrics, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the server's metrics (%s): %s", s.metrics, resp.Status)
	}
	return parseWrites(bufio.NewScanner(resp.Body))
}

// parseWrites sums the write operations' counters of a Prometheus text
// exposition by operation.
func parseWrites(sc *bufio.Scanner) (map[string]float64, error) {
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	out := map[string]float64{}
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "persistence_requests{") && !strings.HasPrefix(line, "visibility_persistence_requests{") {
			continue
		}
		_, rest, ok := strings.Cut(line, `operation="`)
		if !ok {
			continue
		}
		op, _, _ := strings.Cut(rest, `"`)
		if !isWrite(op) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[op] += v
	}
	return out, sc.Err()
}

// writesBetween are the writes from before to after, by operation, and
// their sum.
func writesBetween(before, after map[string]float64) (map[string]float64, float64) {
	d, sum := map[string]float64{}, 0.0
	for op, v := range after {
		if n := v - before[op]; n > 0 {
			d[op], sum = n, sum+n
		}
	}
	return d, sum
}
