// Package migrations embeds the SQL migrations of both stores so the binary
// can apply them at start-up and through `gateway migrate`. Files are named
// NNNN_description.sql and applied in order, each in its own transaction.
package migrations

import "embed"

// Postgres holds the PostgreSQL migrations under postgres/.
//
//go:embed postgres/*.sql
var Postgres embed.FS

// SQLite holds the SQLite migrations under sqlite/.
//
//go:embed sqlite/*.sql
var SQLite embed.FS
