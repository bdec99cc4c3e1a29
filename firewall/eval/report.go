// This file names the probe's report of the found firewall here, where the
// evaluator fills it; the values are the firewall model's (firewall.Report),
// so the CLI and the workflows read them without the evaluator.

package eval

import "adoption/firewall"

// Report is firewall.Report.
type Report = firewall.Report

// TableSummary is firewall.TableSummary.
type TableSummary = firewall.TableSummary

// ChainSummary is firewall.ChainSummary.
type ChainSummary = firewall.ChainSummary
