package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// describeEnv reads the machine and server versions for the report.
func describeEnv(ctx context.Context, db string) (string, error) {
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pg, vec string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'),
		coalesce((SELECT default_version FROM pg_available_extensions WHERE name = 'vector'), 'none')`).Scan(&pg, &vec); err != nil {
		return "", fmt.Errorf("read versions: %w", err)
	}
	return fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s/%s, %s, PostgreSQL %s, pgvector %s",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), pg, vec), nil
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }

// lat formats p50 / p99, or a dash when not measured.
func lat(l latency) string {
	if l.n == 0 {
		return "–"
	}
	return ms(l.p50) + " / " + ms(l.p99)
}

// render writes the markdown report.
func render(o options, env, loadStart string, rs []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", o.title)
	fmt.Fprintf(&b, "`go run ./bench/search -sizes %s -users %d -queries %d -limit %d -seed %d` — %s.\n\n",
		joinSizes(o.sizes), o.users, o.queries, o.limit, o.seed, env)
	fmt.Fprintf(&b, "Items are generated texts of 8–39 Zipf-distributed words from an %d-word vocabulary, "+
		"spread evenly over %d users of one tenant, embedded by the local embedder (384 dimensions). "+
		"Every search is one user's (tenant and user filter inside the query), top %d, one client, "+
		"after a warm-up pass; latencies are p50 / p99 in ms over %d queries (%d for HNSW forced). "+
		"The machine is shared: load average %s at the start, %s at the end.\n\n",
		vocabularySize, o.users, o.limit, o.queries, min(o.queries, o.hnswQueries), loadStart, loadAverage())

	b.WriteString("### Indexing\n\n")
	b.WriteString("| items | embed + COPY (items/s) | embedder alone (items/s per core) | HNSW build | HNSW build (items/s) | whole size (load, build, searches) |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.load.elapsed == 0 {
			fmt.Fprintf(&b, "| %d | – | – | – | – | – |\n", r.items)
			continue
		}
		build, rate := "–", "–"
		switch {
		case r.built:
			build = r.build.Round(10 * time.Millisecond).String()
			rate = fmt.Sprintf("%.0f", float64(r.items)/r.build.Seconds())
		case r.build > 0:
			build = "not finished in " + r.build.Round(time.Second).String()
		}
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %s | %s | %s |\n", r.items,
			float64(r.items)/r.load.elapsed.Seconds(), float64(r.items)/r.load.embedBusy.Seconds(), build, rate,
			r.took.Round(time.Second))
	}

	b.WriteString("\n### Search latency (ms, p50 / p99)\n\n")
	b.WriteString("| items | items per user | vector, no HNSW index (exact) | vector, HNSW forced | HNSW recall@k | vector, planner's choice | index the planner chose | full text |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, r := range rs {
		recall, plan := "–", "–"
		if r.hnsw.n > 0 {
			recall = fmt.Sprintf("%.3f", r.recall)
		}
		if r.plannerPlan != "" {
			plan = "`" + r.plannerPlan + "`"
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s | %s | %s |\n", r.items, r.items/max(r.users, 1),
			lat(r.exact), lat(r.hnsw), recall, lat(r.planner), plan, lat(r.text))
	}
	var notes []string
	for _, r := range rs {
		if r.note != "" {
			notes = append(notes, fmt.Sprintf("- %d items: %s.", r.items, r.note))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	for _, r := range rs {
		if r.explainPlanner == "" {
			continue
		}
		fmt.Fprintf(&b, "\n<details><summary>%d items: EXPLAIN ANALYZE of one search, as planned and with HNSW forced</summary>\n\n", r.items)
		fmt.Fprintf(&b, "```\n-- planner's choice\n%s\n-- HNSW forced (enable_sort, enable_seqscan, enable_bitmapscan off)\n%s\n```\n\n</details>\n",
			r.explainPlanner, r.explainHNSW)
	}
	return b.String()
}

// joinSizes formats the sizes flag back.
func joinSizes(sizes []int) string {
	s := make([]string, len(sizes))
	for i, n := range sizes {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

// loadAverage returns the 1-minute load average, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}
