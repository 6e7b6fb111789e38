-- Mail hardening (issue 19). Additive and safe on a database with rows: every email queued before it still delivers.
--
-- 1. Each mailbox is parsed once, at queue time, and stored as the mailer needs it:
--    {from: {name, address}, to: [{name, address}], cc: [...], bcc: [...], reply_to: [...]}. Null on rows queued
--    before this migration: the mailer parses their text columns once, as it always did.
alter table emails add column mailboxes jsonb;

-- 2. Idempotency keys are scoped to the sending API key that used them (Resend's rule): the same Idempotency-Key sent
--    by two keys of one product names two requests. A bound key takes its email's sending key; a claim still in flight,
--    or one whose email's key was deleted, cannot be scoped and is dropped (a claim in flight frees itself within a
--    minute anyway, and a deleted key can never send again).
alter table mail_idempotency_keys add column api_key_id uuid references mail_api_keys (id) on delete cascade;
update mail_idempotency_keys k set api_key_id = e.api_key_id from emails e where e.id = k.email_id;
delete from mail_idempotency_keys where api_key_id is null;
alter table mail_idempotency_keys alter column api_key_id set not null;
alter table mail_idempotency_keys drop constraint mail_idempotency_keys_pkey;
alter table mail_idempotency_keys add primary key (product_id, api_key_id, key);
