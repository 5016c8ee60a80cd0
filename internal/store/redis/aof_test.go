package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/memgate/memgate/internal/testenv"
)

// counted reads the rewriter's metric for result.
func counted(t *testing.T, r *aofRewriter, result string) float64 {
	t.Helper()
	var m dto.Metric
	if err := r.requests.WithLabelValues(result).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestAOFRewritesAreSpacedOut: erasures in a loop do not keep Redis
// rewriting its append-only file back to back. The first purge's request
// runs at once; every request after it waits out aofInterval, and all the
// requests made meanwhile are served by one; a request that finds a
// rewrite running (begun, maybe, before the purge) is made again an
// interval later; a refusal is counted and the loop goes on. Counted, not
// timed: the wait is held by the test.
func TestAOFRewritesAreSpacedOut(t *testing.T) {
	p := testenv.NewPaced()
	results := []string{aofStarted, aofBusy, aofStarted, aofRefused}
	run := func(context.Context) (string, error) {
		res := results[min(p.Run(), len(results)-1)]
		if res == aofStarted {
			return res, nil
		}
		return res, errors.New(res)
	}
	r := startAOFRewriter(run, p.Wait, nil)
	defer r.stop()

	r.request()
	p.Until(t, "the first request", func(n, _ int) bool { return n == 1 })
	for range 50 { // an erasure loop
		r.request()
	}
	p.Until(t, "the next request to wait out the interval", func(_, w int) bool { return w == 1 })
	if n, _ := p.State(); n != 1 {
		t.Fatalf("%d requests before the interval passed, want 1", n)
	}
	if d := p.Waited(0); d <= 0 || d > aofInterval {
		t.Errorf("waited %v, want within (0, %v]", d, aofInterval)
	}
	p.Pass()
	p.Until(t, "one request for the 50 purges, which finds a rewrite running", func(n, _ int) bool { return n == 2 })
	p.Until(t, "the busy request asked again after an interval", func(_, w int) bool { return w == 2 })
	p.Pass()
	p.Until(t, "the request made again", func(n, _ int) bool { return n == 3 })
	r.request()
	p.Until(t, "a later purge's request to wait its turn", func(_, w int) bool { return w == 3 })
	p.Pass()
	p.Until(t, "the later request, refused", func(n, _ int) bool { return n == 4 })
	p.Until(t, "the refusal counted", func(int, int) bool { return counted(t, r, aofRefused) == 1 })
	for result, want := range map[string]float64{aofStarted: 2, aofBusy: 1, aofRefused: 1} {
		if got := counted(t, r, result); got != want {
			t.Errorf("memgate_redis_aof_rewrites_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// TestAOFRewriteOfAPurgeOutlivesAStop: a gateway stopped (a rolling
// deploy) while a purge's request waits out the interval since the last
// one makes that request on its way out: otherwise the erased user's
// text would stay in the append-only file until Redis rewrites it by
// itself, which a small dataset may never make it do. A stop with no
// request waiting makes none.
func TestAOFRewriteOfAPurgeOutlivesAStop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second bool // a second purge, within the interval, before the stop
		want   int
	}{
		{"a request waiting", true, 2},
		{"none waiting", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.NewPaced()
			r := startAOFRewriter(func(context.Context) (string, error) { p.Run(); return aofStarted, nil }, p.Wait, nil)
			r.request()
			p.Until(t, "the first request", func(n, _ int) bool { return n == 1 })
			if tc.second {
				r.request()
				p.Until(t, "the second purge's request to wait out the interval", func(_, w int) bool { return w == 1 })
			}
			r.stop()
			if n, _ := p.State(); n != tc.want {
				t.Fatalf("%d requests by the stop, want %d", n, tc.want)
			}
		})
	}
}

// TestRewriteAOFAgainstRedis: against real Redis servers of the test's
// own, a request starts a rewrite only where the append-only file is on,
// and a server that refuses BGREWRITEAOF or INFO (as a managed Redis may)
// is a refusal, not a failure to reach it. A queue's Scrub on a refusing
// server neither blocks nor fails.
func TestRewriteAOFAgainstRedis(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"append-only file on", []string{"--appendonly", "yes"}, aofStarted},
		{"append-only file off", []string{"--appendonly", "no"}, aofOff},
		{"BGREWRITEAOF refused", []string{"--appendonly", "yes", "--rename-command", "BGREWRITEAOF", ""}, aofRefused},
		{"INFO refused", []string{"--appendonly", "yes", "--rename-command", "INFO", ""}, aofRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, _ := testenv.PrivateRedis(t, tt.args...)
			rdb, err := NewClient(url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rdb.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := rewriteAOF(ctx, rdb)
			if got != tt.want {
				t.Fatalf("rewriteAOF = %q (%v), want %q", got, err, tt.want)
			}
			for until := time.Now().Add(60 * time.Second); tt.want == aofStarted; time.Sleep(10 * time.Millisecond) {
				// The rewrite started ends before Scrub asks for another.
				if info, err := rdb.Info(ctx, "persistence").Result(); err == nil && strings.Contains(info, "aof_rewrite_in_progress:0") {
					break
				}
				if time.Now().After(until) {
					t.Fatal("the rewrite did not end")
				}
			}
			q, err := NewQueue(ctx, rdb, QueueConfig{})
			if err != nil {
				t.Fatal(err)
			}
			q.Scrub()
			until := time.Now().Add(60 * time.Second)
			for counted(t, q.aof, tt.want) == 0 {
				if time.Now().After(until) {
					t.Fatalf("Scrub's request not counted as %q", tt.want)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAOFRewriteOfAPurgeOutlivesAKill: a gateway killed (not stopped)
// while a purge's request waits out the interval since the last rewrite
// cannot make it on its way out; the request is marked in Redis, and the
// next process's queue on that Redis makes it when it starts, then clears
// the mark, so the process after it asks for nothing.
func TestAOFRewriteOfAPurgeOutlivesAKill(t *testing.T) {
	url, _ := testenv.PrivateRedis(t, "--appendonly", "yes")
	rdb, err := NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := QueueConfig{Prefix: "kill:"}
	rewriteEnded := func() {
		t.Helper()
		for until := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if info, err := rdb.Info(ctx, "persistence").Result(); err == nil && strings.Contains(info, "aof_rewrite_in_progress:0") {
				return
			}
			if time.Now().After(until) {
				t.Fatal("the rewrite did not end")
			}
		}
	}
	waitCounted := func(q *Queue, result string) {
		t.Helper()
		for until := time.Now().Add(60 * time.Second); counted(t, q.aof, result) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(until) {
				t.Fatalf("no request counted as %q", result)
			}
		}
	}
	due := func() bool {
		t.Helper()
		n, err := rdb.Exists(ctx, "kill:capture:aof-due").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	first, err := NewQueue(ctx, rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	first.Scrub() // made at once
	waitCounted(first, aofStarted)
	rewriteEnded()
	first.Scrub()                      // waits out the interval
	if first.aof.loop.Stop(); !due() { // the kill: the loop ends, nothing made on the way out
		t.Fatal("a request waiting out the interval is not marked in Redis")
	}
	if n := counted(t, first.aof, aofStarted); n != 1 {
		t.Fatalf("the killed process made %v rewrites, want 1", n)
	}

	next, err := NewQueue(ctx, rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	waitCounted(next, aofStarted)
	for until := time.Now().Add(30 * time.Second); due(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(until) {
			t.Fatal("the mark outlived the rewrite it asked for")
		}
	}
}
