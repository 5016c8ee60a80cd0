-- covered_tokens is what the messages a summary (and its predecessors)
-- replaced would cost verbatim, for the tokens-saved accounting.
ALTER TABLE summaries ADD COLUMN covered_tokens INTEGER NOT NULL DEFAULT 0;
