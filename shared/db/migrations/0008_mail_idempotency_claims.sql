-- Idempotency claims carry a token: the request that made a claim binds it to its email (or releases it) only while
-- the claim is still its own. A request so slow that its claim was taken over as abandoned can then neither bind a
-- second email to the key nor release the newer request's claim.
alter table mail_idempotency_keys add column claim_token uuid;
