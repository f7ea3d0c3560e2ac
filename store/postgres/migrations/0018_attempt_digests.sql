-- A transforming destination's attempts record the script's version and
-- what was sent (sha256 digests), so an operator can see what a destination
-- got, and that every attempt and replica sent the same bytes. '' for
-- attempts without a transformation; on the partitioned parent, so every
-- partition (and every one made later) has them. A delivery the
-- transformation skipped is in the state 'skipped' (deliveries.state is
-- free text: no CHECK).
ALTER TABLE attempts ADD COLUMN script_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN sent_digest TEXT NOT NULL DEFAULT '';
