package scale

import (
	"bufio"
	"strings"
	"testing"
)

// The server's write counters are summed by operation over their other
// labels; reads are left out, and a line that is not a number fails.
func TestParseWrites(t *testing.T) {
	text := `# TYPE persistence_requests counter
persistence_requests{operation="UpdateWorkflowExecution",service_name="history"} 40
persistence_requests{operation="UpdateWorkflowExecution",service_name="frontend"} 2
persistence_requests{operation="GetWorkflowExecution",service_name="history"} 9
persistence_requests{operation="CreateTasks",service_name="history"} 3
visibility_persistence_requests{operation="UpsertWorkflowExecution"} 5
visibility_persistence_requests{operation="ListWorkflowExecutions"} 7
persistence_latency_count{operation="UpdateWorkflowExecution"} 99
`
	got, err := parseWrites(bufio.NewScanner(strings.NewReader(text)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"UpdateWorkflowExecution": 42, "CreateTasks": 3, "UpsertWorkflowExecution": 5}
	if len(got) != len(want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	d, sum := writesBetween(map[string]float64{"UpdateWorkflowExecution": 40}, got)
	if sum != 10 || d["UpdateWorkflowExecution"] != 2 {
		t.Errorf("between: %v %v, want 10 with 2 updates", d, sum)
	}
	if _, err := parseWrites(bufio.NewScanner(strings.NewReader(`persistence_requests{operation="CreateTasks"} x`))); err == nil {
		t.Error("a counter that is not a number was read")
	}
}
