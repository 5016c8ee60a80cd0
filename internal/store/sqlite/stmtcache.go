package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// maxCachedStmts bounds the read statements a Store keeps prepared; past it,
// further statements are prepared per call. The request path uses about a
// dozen distinct statements.
const maxCachedStmts = 64

// stmtCache keeps read statements prepared, by SQL text, on the read pool:
// each is parsed once per connection instead of once per query (SQLite's
// parser and planner were about a tenth of a memory-on request's CPU). It
// is safe for concurrent use.
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	closed bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}}
}

// QueryContext runs query on the read pool through its cached statement.
func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, query)
	if err != nil || st == nil {
		return c.db.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext runs query on the read pool through its cached statement.
func (c *stmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, query)
	if err != nil || st == nil {
		// Prepared again here, the error is reported through the Row.
		return c.db.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// stmt returns query's statement, prepared on first use; nil (and no error)
// when the cache is full or closed.
func (c *stmtCache) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.stmts[query]
	full := c.closed || len(c.stmts) >= maxCachedStmts
	c.mu.Unlock()
	if ok || full {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok || c.closed { // prepared meanwhile, or closed
		st.Close()
		return prev, nil
	}
	c.stmts[query] = st
	return st, nil
}

// prepared returns query's statement when it is already prepared, else nil;
// it never prepares one (see writeTx).
func (c *stmtCache) prepared(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// writeTx is a write transaction whose statements listed in hotWrites run
// through statements prepared once on the single writer connection, when
// the Store opened (preparing them inside a transaction would wait for the
// connection the transaction holds); any other statement is prepared per
// call, as *sql.Tx does. Capture's save runs eight statements per
// exchange, and preparing them was a tenth of its CPU.
type writeTx struct {
	*sql.Tx
	stmts *stmtCache
}

// ExecContext executes query in the transaction.
func (t writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.stmts.prepared(query); st != nil {
		return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// QueryRowContext runs query, which returns at most one row, in the
// transaction.
func (t writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.stmts.prepared(query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// prepareWrites prepares hotWrites on the writer, for writeTx.
func (s *Store) prepareWrites(ctx context.Context) error {
	for _, q := range hotWrites {
		if _, err := s.writes.stmt(ctx, q); err != nil {
			return fmt.Errorf("prepare write statement: %w", err)
		}
	}
	return nil
}

// Close closes the cached statements; later queries are prepared per call.
func (c *stmtCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for q, st := range c.stmts {
		errs = append(errs, st.Close())
		delete(c.stmts, q)
	}
	return errors.Join(errs...)
}
