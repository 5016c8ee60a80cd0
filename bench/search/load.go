package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/memgate/memgate/internal/engine/recall"
)

// hnswIndex is the HNSW index the schema defines (migrations/postgres).
const hnswIndex = "memory_items_embedding_384"

// createDB creates a throwaway database on the server at base and returns
// its URL and a function that drops it.
func createDB(ctx context.Context, base string) (string, func(), error) {
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connect: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	name := "memgate_bench_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// withParams returns dbURL with run-time parameters set for every session.
func withParams(dbURL string, params map[string]string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// loadStats is what loading measured.
type loadStats struct {
	elapsed   time.Duration // generate + embed + COPY, wall clock
	embedBusy time.Duration // time the workers spent embedding, summed
	loaded    int           // items stored (fewer than asked when the deadline came first)
}

// load generates, embeds and COPYs n items into memory_items, with one
// generating/embedding worker per CPU feeding a single connection, and stops
// early (keeping what it stored) at deadline.
func load(ctx context.Context, conn *pgx.Conn, c *corpus, n int, deadline time.Time) (loadStats, error) {
	if err := pgxvec.RegisterTypes(ctx, conn); err != nil {
		return loadStats{}, fmt.Errorf("register pgvector: %w", err)
	}
	emb := recall.NewLocal(384)
	const batch = 512
	rows := make(chan [][]any, 2*runtime.GOMAXPROCS(0))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		busy time.Duration
		next = make(chan int)
	)
	go func() {
		defer close(next)
		for start := 0; start < n; start += batch {
			select {
			case next <- start:
			case <-wctx.Done():
				return
			}
		}
	}()
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var spent time.Duration
			defer func() { mu.Lock(); busy += spent; mu.Unlock() }()
			for s := range next {
				out := make([][]any, 0, batch)
				texts := make([]string, 0, batch)
				items := make([]item, 0, batch)
				for i := s; i < min(s+batch, n); i++ {
					it := c.item(i)
					items = append(items, it)
					texts = append(texts, it.text)
				}
				t0 := time.Now()
				vecs, _ := emb.Embed(ctx, texts, time.Time{})
				spent += time.Since(t0)
				for j, it := range items {
					out = append(out, []any{benchTenant, it.user, it.conversation, "message", it.source, 0,
						it.text, pgvector.NewVector(vecs[j]), 384, emb.Model(), it.createdAt})
				}
				select {
				case rows <- out:
				case <-wctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(rows) }()

	// COPY in chunks, each its own transaction, so that a load cut short by
	// the deadline keeps what it stored and the searches run at that size.
	src := &chanSource{rows: rows}
	var loaded int
	for !src.done && loaded < n {
		if time.Now().After(deadline) {
			break
		}
		src.left = loadChunk
		copied, err := conn.CopyFrom(ctx, pgx.Identifier{"memory_items"},
			[]string{"tenant", "user_id", "conversation", "kind", "source", "chunk", "content", "embedding", "dims", "model", "created_at"},
			src)
		if err != nil {
			return loadStats{}, fmt.Errorf("copy: %w", err)
		}
		loaded += int(copied)
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	return loadStats{elapsed: elapsed, embedBusy: busy, loaded: loaded}, nil
}

// loadChunk is the number of rows one COPY statement stores.
const loadChunk = 50000

// chanSource is a pgx.CopyFromSource reading batches of rows from a
// channel, left rows at a time.
type chanSource struct {
	rows <-chan [][]any
	cur  [][]any
	i    int
	left int
	done bool
}

func (s *chanSource) Next() bool {
	if s.left == 0 {
		return false
	}
	for s.i+1 >= len(s.cur) {
		b, ok := <-s.rows
		if !ok {
			s.done = true
			return false
		}
		s.cur, s.i = b, -1
	}
	s.i++
	s.left--
	return true
}

func (s *chanSource) Values() ([]any, error) { return s.cur[s.i], nil }
func (s *chanSource) Err() error             { return nil }

// buildIndex creates the HNSW index from its definition (the migration's, so
// the same m and ef_construction as production), with mem as
// maintenance_work_mem, giving up at deadline; built is false when it did
// not finish in time.
func buildIndex(ctx context.Context, conn *pgx.Conn, def, mem string, deadline time.Time) (elapsed time.Duration, built bool, err error) {
	left := time.Until(deadline)
	if left <= 0 {
		return 0, false, nil
	}
	// Two cores: one leader plus one parallel worker; the graph must fit in
	// maintenance_work_mem or the build slows down by an order of magnitude
	// (pgvector then says so in a NOTICE, which measure logs and reports).
	for _, set := range []string{
		"SET maintenance_work_mem = '" + mem + "'",
		"SET max_parallel_maintenance_workers = 1",
		fmt.Sprintf("SET statement_timeout = %d", left.Milliseconds()),
	} {
		if _, err := conn.Exec(ctx, set); err != nil {
			return 0, false, fmt.Errorf("%s: %w", set, err)
		}
	}
	defer conn.Exec(context.WithoutCancel(ctx), "RESET maintenance_work_mem")
	defer conn.Exec(context.WithoutCancel(ctx), "RESET statement_timeout")
	start := time.Now()
	_, err = conn.Exec(ctx, def)
	elapsed = time.Since(start)
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == "57014" { // query_canceled by the timeout
		return elapsed, false, nil
	}
	if err != nil {
		return elapsed, false, fmt.Errorf("create index: %w", err)
	}
	return elapsed, true, nil
}
