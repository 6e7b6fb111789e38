-- The email log's filters (status, recipient, domain, time) and the suppression list, read by the platform API and the
-- public GET /emails. Each filter has an index, so a page filtered by one reads about the rows it shows rather than
-- the product's whole log (the recipients' GIN index spans products: docs/mail.md); the time range rides on
-- emails_product_recent. `if not exists`: a large installation may build them beforehand, CONCURRENTLY
-- (docs/upgrading.md).

-- Status: the product's emails in one state, newest first.
create index if not exists emails_product_status on emails (product_id, last_event, created_at desc, id desc);

-- Domain: the emails sent from one domain, newest first. Also what deleting a domain needs (its emails' domain_id is
-- set to null), which until now scanned every email.
create index if not exists emails_domain_recent on emails (domain_id, created_at desc, id desc) where domain_id is not null;

-- Recipient: every address of To, Cc and Bcc, lower-cased, as parsed at queue time (emails.mailboxes). Immutable, so
-- it can be indexed; a row queued before mailboxes existed (null) has no recipient to match.
create or replace function email_recipients(mailboxes jsonb) returns text[] language sql immutable parallel safe as $$
  select coalesce(array_agg(lower(m ->> 'address')), '{}')
  from jsonb_array_elements(coalesce(mailboxes -> 'to', '[]') || coalesce(mailboxes -> 'cc', '[]') || coalesce(mailboxes -> 'bcc', '[]')) m
$$;
create index if not exists emails_recipients on emails using gin (email_recipients(mailboxes));

-- The suppression list, newest first within a product (its primary key orders by address).
create index if not exists mail_suppressions_recent on mail_suppressions (product_id, created_at desc, address);
