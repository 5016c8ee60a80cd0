// Package postgres is memgate's PostgreSQL + pgvector memory store: the
// conversations, messages, erasures, summaries, facts and searchable memory
// items of every tenant, behind a pgx v5 connection pool.
//
// Open applies the embedded migrations (migrations/postgres) before it
// returns, so a Store is always on the current schema. Several gateway and
// worker processes may share one database: migrations are serialized with an
// advisory lock, writes to one conversation are serialized by a row lock, and
// message keys make redelivered captures no-ops.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/store/search"
)

// defaultMaxConns is the pool's size unless the URL sets pool_max_conns.
const defaultMaxConns = 16

// minConns is the smallest pool Open accepts: a chat lock's connection and
// a connection for the saves under it (LockChats).
const minConns = 2

// cancelDelay is how long a query whose context ended may still run before
// the server is asked to cancel it (its connection is cut after five
// times that).
const cancelDelay = time.Second

// searcher is the Store's recall reads, embedded (search.Searcher).
type searcher = search.Searcher

// Store is a memory store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	// vacuum reclaims erased rows in the background (erasure.go).
	vacuum *pace.Loop
	// chatLockSlots bounds the connections LockChats holds to half the
	// pool, so the saves made under them always find one (chatlock.go).
	chatLockSlots chan struct{}
	// chatLockTTL is how long a chat lock outlives its holder's last
	// renewal (defaultChatLockTTL; chatlock.go).
	chatLockTTL time.Duration
	// holds are the holds of chat locks the Store has, by fence: their
	// keys and their lock connection's backend pid, which the writes
	// under each check (chatlock.go).
	holds contract.ChatHolds[int32, int32]
	// index ranks SearchVector's and SearchText's results from memory
	// (indexsource.go). The searcher, whose methods are the Store's
	// SearchVector, SearchText, CommonTerms, MessagesAround and Collectors
	// (each item with its Embedding, read-only), reads it and the turns
	// around recalled messages kept in memory, falling back on SQL
	// (search.go).
	index *itemindex.Index
	searcher
}

// Open connects to the database at url, applies pending migrations and
// returns a ready Store. The pool registers pgvector's types on every
// connection and holds up to 16 connections unless the URL's pool_max_conns
// says otherwise (at least 2: a pool of one is refused). It fails with
// ErrChatLocksDoNotHold when a chat lock does not hold on the way to the
// database (checkChatLocks). Close releases it.
func Open(ctx context.Context, url string, logger *slog.Logger) (*Store, error) {
	return open(ctx, url, logger, nil)
}

// open is Open, with dial, when not nil, in place of the connections'
// dialer (a test's stand-in for a connection pooler).
func open(ctx context.Context, url string, logger *slog.Logger, dial pgconn.DialFunc) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	if dial != nil {
		cfg.ConnConfig.DialFunc = dial
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgxpool's default (the larger of 4 and the CPUs) starves a gateway:
		// the capture lanes, the enricher and every request's memory reads
		// share the pool, and on a small machine four connections made the
		// requests queue for one (issue 15's benchmark).
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.MaxConns < minConns {
		// A chat's turns are stored only under its chat lock, which holds
		// a connection of its own while they are saved on another: with
		// one connection no such turn could ever be stored.
		return nil, fmt.Errorf("postgres: pool_max_conns is %d: at least %d connections are needed, one to hold a chat's lock and one to save under it", cfg.MaxConns, minConns)
	}

	// Migrate on a plain connection first: the pool's AfterConnect needs the
	// vector type, which the first migration creates.
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w: %w", memory.ErrUnavailable, err)
	}
	err = migrate(ctx, conn, logger)
	if cerr := conn.Close(ctx); err == nil && cerr != nil {
		err = fmt.Errorf("postgres: close migration connection: %w", cerr)
	}
	if err != nil {
		return nil, err
	}

	// A request that gives up on its memory (memory.load_timeout) cancels
	// the context of its queries. pgx's default then interrupts the
	// connection at once and closes it, and under load that turned every
	// late read into a new connection — a server backend started, pgvector's
	// types registered — making the next reads later still. A cancelled
	// query is left to finish instead (the caller has stopped waiting; the
	// proxy does not wait for Prepare), then asked to stop after a second,
	// and its connection cut only after five.
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: cancelDelay, DeadlineDelay: 5 * cancelDelay}
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if err := pgxvec.RegisterTypes(ctx, c); err != nil {
			return fmt.Errorf("register pgvector types: %w", err)
		}
		// Times are read in UTC, as every store returns them.
		c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: create pool: %w", err)
	}
	s := &Store{pool: pool, logger: logger, chatLockSlots: make(chan struct{}, cfg.MaxConns/2), chatLockTTL: defaultChatLockTTL}
	s.SetCacheLimits(itemindex.DefaultLimits)
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.checkChatLocks(ctx, s.lostChats); err != nil {
		pool.Close()
		return nil, err
	}
	s.vacuum = newVacuumer(pool, logger)
	return s, nil
}

// Ping reports whether the database is reachable; its error wraps
// memory.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w: %w", memory.ErrUnavailable, err)
	}
	return nil
}

// Close stops a running post-erasure VACUUM and closes the pool, waiting
// for acquired connections to be released.
func (s *Store) Close() error {
	s.vacuum.Stop()
	s.pool.Close()
	return nil
}

// inTx runs fn in a transaction, committing when it returns nil and rolling
// back otherwise.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) (err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", unavailable(err))
	}
	defer func() {
		if err != nil {
			if rerr := tx.Rollback(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
				s.logger.Warn("postgres: rollback failed", "err", rerr)
			}
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", unavailable(err))
	}
	return nil
}

// unavailable marks connection-level failures (refused, reset, server
// shutting down) with memory.ErrUnavailable, so callers can degrade instead
// of failing; SQL errors and sentinels pass through unchanged.
func unavailable(err error) error {
	if err == nil || errors.Is(err, memory.ErrUnavailable) {
		return err
	}
	var (
		connErr *pgconn.ConnectError
		netErr  net.Error
		pgErr   *pgconn.PgError
	)
	switch {
	case errors.As(err, &pgErr):
		// Class 08 is connection exception; 57P0x the server shutting down.
		if !strings.HasPrefix(pgErr.Code, "08") && !strings.HasPrefix(pgErr.Code, "57P0") {
			return err
		}
	case errors.As(err, &connErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
	default:
		return err
	}
	return fmt.Errorf("%w: %w", memory.ErrUnavailable, err)
}

// SetCacheLimits replaces the Store's in-memory recall caches, before it
// serves searches, with empty ones bounded by lim (Open gives
// itemindex.DefaultLimits).
func (s *Store) SetCacheLimits(lim itemindex.Limits) {
	s.index = itemindex.New(indexSource{s.pool}, lim)
	s.searcher = search.NewSearcher(s.index, s.sqlSearches(), s.ItemRevisions)
}

// Forget drops what the store keeps in memory of the user (its recall
// index: vectors, full text, items, turns), erased by another process
// sharing it (the erasure's notice): stale already, since the erasure moved
// the user's revisions, it need not wait for eviction.
func (s *Store) Forget(tenant, user string) { s.index.Forget(tenant, user) }
