package faults

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		printSummary()
		os.Exit(code)
	}))
}

// soak reports whether the long runs were asked for (RLOCK_SOAK=1).
func soak() bool { return os.Getenv("RLOCK_SOAK") == "1" }

// row is one fault run's figures for the summary table.
type row struct {
	fault, backend                 string
	clients, acquisitions, unknown int
	lost, linViolations, overlaps  int
	linChecked, exclusiveChecked   bool
	tokens, tokenViolations        int
	tokensChecked                  bool
	fifoWaits, fifoViolations      int
	fifoChecked                    bool
	claimSamples, claimViolations  int
	claimChecked                   bool
}

var summary struct {
	mu   sync.Mutex
	rows []row
}

func report(r row) {
	summary.mu.Lock()
	summary.rows = append(summary.rows, r)
	summary.mu.Unlock()
}

// printSummary prints the runs of this process as a Markdown table.
func printSummary() {
	summary.mu.Lock()
	defer summary.mu.Unlock()
	if len(summary.rows) == 0 {
		return
	}
	rows := summary.rows
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].fault < rows[j].fault })
	var b strings.Builder
	b.WriteString("\nfault runs (acquisitions include re-entries; unknown = calls with an unknown outcome, each followed by a read of the caller's hold count):\n")
	b.WriteString("| fault | backend | clients | acquisitions checked | unknown outcomes | losses told | linearizability violations | exclusion violations | fencing tokens checked (violations) | queued waits checked for FIFO (violations) | holder-vs-server samples (violations) |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		lin, ex := "n/a", "n/a"
		if r.linChecked {
			lin = fmt.Sprint(r.linViolations)
		}
		if r.exclusiveChecked {
			ex = fmt.Sprint(r.overlaps)
		}
		tok := "n/a (counter reset)"
		if r.tokensChecked {
			tok = fmt.Sprintf("%d (%d)", r.tokens, r.tokenViolations)
		}
		fifo := "n/a"
		if r.fifoChecked {
			fifo = fmt.Sprintf("%d (%d)", r.fifoWaits, r.fifoViolations)
		}
		claims := "n/a"
		if r.claimChecked {
			claims = fmt.Sprintf("%d (%d)", r.claimSamples, r.claimViolations)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %s | %s | %s | %s | %s |\n",
			r.fault, r.backend, r.clients, r.acquisitions, r.unknown, r.lost, lin, ex, tok, fifo, claims)
	}
	fmt.Print(b.String())
}

// longEnv selects the long form of the fault runs (.ci/run sets it): more
// strikes, rounds and holdings. Without it every fault still runs once,
// in a shorter form.
const longEnv = "RLOCK_FAULTS_LONG"

// long reports whether the long form was asked for (RLOCK_FAULTS_LONG=1,
// or a soak run).
func long() bool { return os.Getenv(longEnv) == "1" || soak() }
