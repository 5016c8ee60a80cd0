// Package sqlite embeds memgate's SQLite migrations so the binary applies them at
// start-up and through `gateway migrate`. Files are named NNNN_description.sql
// and applied in order, each in its own transaction.
package sqlite

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
