package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
)

// maxCachedStmts bounds the read statements a Store keeps prepared (the
// request path uses about a dozen); past it, they are prepared per call.
const maxCachedStmts = 64

// stmtCache keeps its pool's statements prepared, by SQL text (parsing was
// a tenth of a memory-on request's CPU): the read pool's on first use, the
// writer's (hotWrites) when the Store opens. It is safe for concurrent use.
type stmtCache struct {
	db    *sql.DB
	stmts sync.Map // SQL text -> *sql.Stmt
	n     atomic.Int32
}

// QueryContext runs query on the pool through its cached statement.
func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st, _ := c.stmt(ctx, query, true); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query on the pool through its cached statement.
func (c *stmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st, _ := c.stmt(ctx, query, true); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, query, args...) // a bad query's error comes through the Row
}

// stmt returns query's statement, prepared now when prepare is set and the
// cache is not full; nil when none (the caller runs query as is).
func (c *stmtCache) stmt(ctx context.Context, query string, prepare bool) (*sql.Stmt, error) {
	if st, ok := c.stmts.Load(query); ok || !prepare || c.n.Load() >= maxCachedStmts {
		st, _ := st.(*sql.Stmt)
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := c.stmts.LoadOrStore(query, st); loaded { // prepared meanwhile
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	c.n.Add(1)
	return st, nil
}

// writeTx is a write transaction whose hotWrites run through the writer's
// statements (a tenth of a save's CPU; preparing inside it would wait for
// the connection it holds); any other is prepared per call.
type writeTx struct {
	*sql.Tx
	stmts *stmtCache
}

// ExecContext executes query in the transaction.
func (t writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st, _ := t.stmts.stmt(ctx, query, false); st != nil {
		return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// QueryRowContext runs query, of at most one row, in the transaction.
func (t writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st, _ := t.stmts.stmt(ctx, query, false); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// Close closes the cached statements.
func (c *stmtCache) Close() error {
	var errs []error
	c.stmts.Range(func(_, st any) bool {
		errs = append(errs, st.(*sql.Stmt).Close())
		return true
	})
	return errors.Join(errs...)
}
