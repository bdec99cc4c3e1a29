// Package marks writes and removes the mesh's marked rules in the found
// firewall: accepts named adoption:<node>:<owner>:<port>/<proto>, placed
// where the predecessor keeps its own per-port accepts on the input and
// forward paths, found by their comment and deleted by handle. It never
// rewrites a rule it did not write, and it does not flip (firewall/flip).
package marks
