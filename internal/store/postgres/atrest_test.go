package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/store/storetest"
)

// atRest reports the tables of the store's schema with a live row holding
// needle in any column: every row read as text (text, json, arrays,
// tsvectors, …), and every bytea column's bytes.
func atRest(ctx context.Context, s *Store, needle string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.relname, coalesce(array_agg(a.attname::text) FILTER (WHERE a.atttypid = 'bytea'::regtype), '{}')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
		GROUP BY c.relname ORDER BY c.relname`)
	if err != nil {
		return nil, err
	}
	type table struct {
		name  string
		bytea []string
	}
	var tables []table
	var tb table
	if _, err := pgx.ForEachRow(rows, []any{&tb.name, &tb.bytea}, func() error {
		tables = append(tables, tb)
		return nil
	}); err != nil {
		return nil, err
	}
	var where []string
	for _, tb := range tables {
		cond := "strpos(t::text, $1) > 0"
		for _, col := range tb.bytea {
			cond += fmt.Sprintf(" OR position(convert_to($1, 'UTF8') IN t.%s) > 0", pgx.Identifier{col}.Sanitize())
		}
		var n int
		if err := s.pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s t WHERE %s",
			pgx.Identifier{tb.name}.Sanitize(), cond), needle).Scan(&n); err != nil {
			return nil, fmt.Errorf("scan %s: %w", tb.name, err)
		}
		if n > 0 {
			where = append(where, fmt.Sprintf("%s (%d rows)", tb.name, n))
		}
	}
	return where, nil
}

func TestErasedIDsAtRest(t *testing.T) {
	storetest.RunErasedAtRest(t, func(t *testing.T) (storetest.KnowledgeStore, storetest.AtRest) {
		s := mustOpen(t)
		return s, func(ctx context.Context, needle string) ([]string, error) { return atRest(ctx, s, needle) }
	})
}
