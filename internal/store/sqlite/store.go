// Package sqlite is memgate's embedded memory store: conversations,
// messages, summaries, facts, memory items (with embeddings and FTS5) and the
// capture outbox, in one SQLite file through modernc.org/sqlite.
//
// Writes go through a pool of exactly one connection whose transactions begin
// IMMEDIATE, so writers in this process queue in database/sql instead of
// failing with SQLITE_BUSY, and writers in other processes wait on the busy
// timeout. Reads use a separate read-only pool that WAL mode lets run
// alongside the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/store/search"
)

// busyTimeout is how long a connection waits for another process's write
// lock before failing with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// searcher is the Store's recall reads, embedded (search.Searcher).
type searcher = search.Searcher

// Store is a memory store in one SQLite file. It is safe for concurrent use.
type Store struct {
	write  *sql.DB
	read   *sql.DB
	logger *slog.Logger
	outbox *Outbox
	enrich *Outbox
	// index ranks SearchVector's and SearchText's results from memory
	// (indexsource.go). The searcher, whose methods are the Store's
	// SearchVector, SearchText, CommonTerms, MessagesAround and
	// Collectors, reads it and the turns around recalled messages kept in
	// memory, falling back on SQL (search.go).
	index *itemindex.Index
	searcher
	// reads runs the request path's reads on read through prepared
	// statements; writes holds hotWrites prepared on write (writeTx).
	reads, writes *stmtCache
	// gate orders the write transactions (writeGate).
	gate writeGate
	// eraseBudget bounds a chunk of an erasure (erasechunks.go);
	// afterChunk is the tests' hook between two chunks (nil elsewhere).
	eraseBudget time.Duration
	afterChunk  chunkHook
	// afterRead is the tests' hook between a read of a user's rows and
	// its answer (nil elsewhere).
	afterRead func()
	// wake starts resumeErasures' next round; stop ends it at Close, and
	// resumed is closed once it has ended.
	wake          chan struct{}
	stop, resumed chan struct{}
	// chatLockTTL is how long a chat lock lasts unrenewed, by the clock
	// chatLockNow; holds are the holds of chat locks this Store has, by
	// fence: their keys and holder token, which the writes under each
	// check (chatlock.go).
	chatLockTTL time.Duration
	chatLockNow func() time.Time
	holds       contract.ChatHolds[int64, string]
}

// Open opens the database at path (creating it and its directory if needed)
// with WAL mode, a busy timeout, foreign keys, synchronous=NORMAL and (on the
// writer) secure_delete, and applies pending migrations. The caller closes it.
func Open(ctx context.Context, path string, logger *slog.Logger) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("open sqlite store: %w: empty path", memory.ErrInvalid)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open sqlite store: create directory: %w", err)
	}
	write, err := sql.Open("sqlite", dsn(path, url.Values{
		"_txlock":       {"immediate"},
		"_journal_mode": {"WAL"},
		"_synchronous":  {"NORMAL"},
		// Every delete on the writer overwrites the deleted content, so erased
		// text does not linger in free space (see erasure.go).
		"_pragma": {"secure_delete(1)"},
	}))
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	// The write connection is opened first: it creates the file and switches
	// it to WAL before any reader attaches.
	if err := pingWhileBusy(ctx, write); err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	// The readers do not memory-map the file: in WAL mode every commit makes
	// each reader unmap it at its next read and fault every page back in,
	// which under capture's steady writes cost more than reading the pages.
	read, err := sql.Open("sqlite", dsn(path, url.Values{
		"_query_only": {"1"},
	}))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers)

	s := &Store{write: write, read: read, logger: logger,
		reads: &stmtCache{db: read}, writes: &stmtCache{db: write},
		eraseBudget: eraseBudget, wake: make(chan struct{}, 1), chatLockTTL: defaultChatLockTTL, chatLockNow: time.Now}
	s.SetCacheLimits(itemindex.DefaultLimits)
	s.outbox = newOutbox(s, "outbox", false)
	s.enrich = newOutbox(s, "enrich_outbox", true)
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	for _, q := range hotWrites { // for writeTx
		if _, err := s.writes.stmt(ctx, q, true); err != nil {
			s.Close()
			return nil, fmt.Errorf("open sqlite store: prepare write statement: %w", err)
		}
	}
	// The erasures a process left under way are finished in the
	// background; their users read as empty meanwhile.
	s.stop, s.resumed = make(chan struct{}), make(chan struct{})
	go func() { defer close(s.resumed); s.resumeErasures(s.stop) }()
	s.resume()
	return s, nil
}

// pingWhileBusy opens db's first connection, retrying for up to busyTimeout
// while another process or Store holds the lock: switching a new file to WAL
// can fail with SQLITE_BUSY at once, without waiting on the busy handler,
// when several openers race on it.
func pingWhileBusy(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(busyTimeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := db.PingContext(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// dsn builds a modernc.org/sqlite URI for path with the given parameters,
// foreign keys on and the busy timeout added.
func dsn(path string, params url.Values) string {
	params.Set("_foreign_keys", "1")
	params.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + params.Encode()
}

// Ping reports whether both connection pools can reach the database.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite writer: %w: %w", memory.ErrUnavailable, err)
	}
	if err := s.read.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite reader: %w: %w", memory.ErrUnavailable, err)
	}
	return nil
}

// Close closes both connection pools. Waiting Claims on the outbox fail.
func (s *Store) Close() error {
	if s.stop != nil {
		close(s.stop)
		<-s.resumed
		s.stop = nil
	}
	return errors.Join(s.reads.Close(), s.writes.Close(), s.read.Close(), s.write.Close())
}

// Outbox returns the durable capture queue kept in the same database. Every
// call returns the same Outbox, so an Enqueue wakes Claims blocked in this
// process.
func (s *Store) Outbox() *Outbox { return s.outbox }

// EnrichOutbox returns the durable queue of stored exchanges waiting for
// enrichment (fact extraction, summaries, indexing), kept in the same
// database. Every call returns the same Outbox.
func (s *Store) EnrichOutbox() *Outbox { return s.enrich }

// inWrite runs fn in a write transaction (BEGIN IMMEDIATE on the single
// writer connection, in the order writeGate gives) and commits it when fn
// returns nil. It is a write a client waits on: see inWriteAs for the
// others.
func (s *Store) inWrite(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.inWriteAs(ctx, false, fn)
}

// inWriteAs is inWrite, for a write no client waits on when background is
// set (writeGate: enrichment's derived writes, its queue's claims and
// acknowledgements), which lets waiting writes of clients go first.
func (s *Store) inWriteAs(ctx context.Context, background bool, fn func(tx *sql.Tx) error) error {
	if err := s.gate.acquire(ctx, background); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer s.gate.release()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// nanos encodes a time as stored: Unix nanoseconds.
func nanos(t time.Time) int64 { return t.UnixNano() }

// fromNanos decodes a stored time, in UTC.
func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// times scans stored times, Unix nanoseconds (contract.Times).
type times struct{}

func (times) Dest(t *time.Time) any      { return (*nanoTime)(t) }
func (times) NullDest(t **time.Time) any { return nullNanoTime{t} }

// nanoTime scans a stored time (fromNanos).
type nanoTime time.Time

func (n *nanoTime) Scan(v any) error {
	ns, ok := v.(int64)
	if !ok {
		return fmt.Errorf("stored time %v is a %T", v, v)
	}
	*n = nanoTime(fromNanos(ns))
	return nil
}

// nullNanoTime scans a stored time that may be NULL (nil).
type nullNanoTime struct{ t **time.Time }

func (n nullNanoTime) Scan(v any) error {
	if v == nil {
		*n.t = nil
		return nil
	}
	*n.t = new(time.Time)
	return (*nanoTime)(*n.t).Scan(v)
}

// SetCacheLimits replaces the Store's in-memory recall caches, before it
// serves requests, with empty ones bounded by lim (Open gives
// itemindex.DefaultLimits).
func (s *Store) SetCacheLimits(lim itemindex.Limits) {
	s.index = itemindex.New(indexSource{s}, lim)
	s.searcher = search.NewSearcher(s.index,
		search.SQLSearches{RankVector: s.searchVectorSQL, RankText: s.searchTextWindow, Store: "sqlite"}, s.ItemRevisions)
}

// Forget drops what the store keeps in memory of the user (its recall
// index: vectors, full text, items, turns), erased by another process
// sharing it (the erasure's notice): stale already, since the erasure moved
// the user's revisions, it need not wait for eviction.
func (s *Store) Forget(tenant, user string) { s.index.Forget(tenant, user) }
