package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// encoderCell is the embedder cell (`bench encoder-cell`): the same
// workload on the embedded store (SQLite) with each of the offline
// embedders, recall.embeddings.provider local (hashed) and encoder (the
// built-in sentence encoder), default settings otherwise, one gateway
// process after the other, against a stand-in upstream that answers at
// once.
//
// One connection: a conversation sends only its newest message, turn after
// turn, each turn twice (memory on, then off, as the embed cell does), with
// a pause between turns as a user reading; the added latency is memory-on
// minus memory-off, p50 and p90. Every question is new, so the query
// embedding is never a cache hit; the gateway's CPU time per turn (both
// requests and the turn's indexing) does not count waiting for a core, as
// wall time on a busy machine does. Many connections (-conns, 64): as many
// conversations at once, no pause, memory on; it reports throughput,
// failed requests, and the share marked X-Memory-Degraded (by part:
// "embedding" when the encoder was saturated past
// memory.embedding_timeout). The gateway's resident memory (RSS, and its
// anonymous part) fresh, once it answers its health check (the encoder
// is loaded at start), and after both runs.
//
//	go run ./bench/cmd/bench encoder-cell
func encoderCell(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("encoder-cell", flag.ContinueOnError)
	fs.SetOutput(stderr)
	turns := fs.Int("turns", 40, "turns of the one-connection conversation")
	think := fs.Duration("think", 200*time.Millisecond, "pause between one-connection turns")
	conns := fs.Int("conns", 64, "connections of the concurrent run")
	concTurns := fs.Int("conc-turns", 8, "turns per conversation in the concurrent run")
	bin := fs.String("gateway", "", "prebuilt gateway binary (default: go build ./cmd/gateway)")
	embedders := fs.String("embedders", "local,encoder", "embedders to run, comma-separated (local, encoder)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	providers := strings.Split(*embedders, ",")
	for _, p := range providers {
		if p != "local" && p != "encoder" {
			return fmt.Errorf("-embedders: unknown embedder %q (local, encoder)", p)
		}
	}
	dir, err := os.MkdirTemp("", "memgate-encoder-cell-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		root, err := moduleRoot(ctx)
		if err != nil {
			return err
		}
		if *bin, err = buildGateway(ctx, root, dir); err != nil {
			return err
		}
	}
	up := newCellUpstream(0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: up, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	base := "http://" + ln.Addr().String() + "/v1"

	fmt.Fprintf(stdout, "## Embedders on the embedded store: encoder vs local (hashed)\n\n")
	fmt.Fprintf(stdout, "SQLite, default settings, stand-in upstream answering at once; one connection: %d newest-only turns, memory on and off, %s apart; %d connections: %d turns each, memory on, no pause.\n\n", *turns, *think, *conns, *concTurns)
	fmt.Fprintf(stdout, "| embedder | 1 conn added p50 | added p90 | gateway CPU per turn | %d conns req/s | failed | degraded | p50 | RSS fresh (anon) | RSS after (anon) |\n|---|---|---|---|---|---|---|---|---|---|\n", *conns)
	for _, provider := range providers {
		pdir := filepath.Join(dir, provider)
		if err := os.MkdirAll(pdir, 0o700); err != nil {
			return err
		}
		gw, err := startGateway(ctx, pdir, *bin, "memgate-"+provider, base,
			"GATEWAY_EMBEDDINGS_PROVIDER="+provider,
			"GATEWAY_STORE=sqlite", "GATEWAY_SQLITE_PATH="+filepath.Join(pdir, "memgate.db"))
		if err != nil {
			return err
		}
		row, err := runEmbedderCell(ctx, gw, provider, *turns, *think, *conns, *concTurns)
		gw.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", provider, err)
		}
		fmt.Fprintln(stdout, row)
	}
	return nil
}

// runEmbedderCell runs both workloads against gw and returns the table row.
func runEmbedderCell(ctx context.Context, gw *server, provider string, turns int, think time.Duration, conns, concTurns int) (string, error) {
	pct := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	// One connection. Conversation 0; the first turns warm the process
	// (the encoder decodes its weights on first use) and are not counted.
	const warm = 3
	fresh, freshAnon, err := residentMemory(gw)
	if err != nil {
		return "", err
	}
	var on, off []time.Duration
	var cpu0 time.Duration
	for t := range turns + warm {
		if t == warm {
			st, err := gw.stats()
			if err != nil {
				return "", err
			}
			cpu0 = st.cpu
		}
		marker := fmt.Sprintf("[c0 t%d]", t)
		text := fmt.Sprintf("%s Question %d: what did my sister say about the trip to the mountains in week %d, and who drove?", marker, t, t)
		dOn, _, err := cellChat(ctx, gw.baseURL, 0, text, "on")
		if err != nil {
			return "", err
		}
		dOff, _, err := cellChat(ctx, gw.baseURL, 0, marker+" off", "off")
		if err != nil {
			return "", err
		}
		if t >= warm {
			on, off = append(on, dOn), append(off, dOff)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(think):
		}
	}
	st1, err := gw.stats()
	if err != nil {
		return "", err
	}
	cpuPerTurn := (st1.cpu - cpu0) / time.Duration(turns)
	// Many connections, conversations 1..conns.
	var (
		mu       sync.Mutex
		lat      []time.Duration
		failed   int
		degraded = map[string]int{}
		wg       sync.WaitGroup
	)
	start := time.Now()
	for c := 1; c <= conns; c++ {
		wg.Go(func() {
			for t := range concTurns {
				text := fmt.Sprintf("[c%d t%d] I keep thinking about plan %d for the weekend, item %d: what did we decide about it?", c, t, c, t)
				d, hdr, err := cellChat(ctx, gw.baseURL, c, text, "on")
				mu.Lock()
				if err != nil {
					failed++
				} else {
					lat = append(lat, d)
					if hdr != "" {
						degraded[hdr]++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	rss, anon, err := residentMemory(gw)
	if err != nil {
		return "", err
	}
	nDegraded := 0
	for _, n := range degraded {
		nDegraded += n
	}
	total := conns * concTurns
	p50 := time.Duration(0)
	if len(lat) > 0 {
		p50 = pct(lat, 0.5)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %.0f | %d of %d | %.1f %% %s | %s | %d MB (%d MB) | %d MB (%d MB) |",
		provider, round(pct(on, 0.5)-pct(off, 0.5)), round(pct(on, 0.9)-pct(off, 0.9)), round(cpuPerTurn),
		float64(len(lat))/elapsed.Seconds(), failed, total,
		100*float64(nDegraded)/float64(max(len(lat), 1)), fmtParts(degraded), round(p50),
		fresh>>20, freshAnon>>20, rss>>20, anon>>20), nil
}

// residentMemory returns gw's resident set and its anonymous part, bytes.
func residentMemory(gw *server) (rss, anon int64, err error) {
	st, err := gw.stats()
	if err != nil {
		return 0, 0, err
	}
	anon, _, err = gw.rssSplit()
	return st.rss, anon, err
}
