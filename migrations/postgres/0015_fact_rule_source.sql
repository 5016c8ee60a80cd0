-- Why a fact is pinned: the rule that pinned it ('' when none did: a
-- model's extraction, the API) and the key of the message it was last
-- stated in ('' when unknown), for the inspector. A reference, never a
-- copy of the message's text.
ALTER TABLE facts ADD COLUMN pin_rule text NOT NULL DEFAULT '';
ALTER TABLE facts ADD COLUMN source_message text NOT NULL DEFAULT '';
