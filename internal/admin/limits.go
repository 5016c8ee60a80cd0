package admin

// Bounds of a memory search on every interface that offers one (this API,
// the MCP server).
const (
	// MaxSearchQuery is the longest query, in bytes.
	MaxSearchQuery = maxSearchQuery
	// MaxSearchTopK is the most results one search returns.
	MaxSearchTopK = maxSearchTopK
)
