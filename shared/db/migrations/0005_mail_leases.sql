-- Mail delivery leases: the mailer that claimed an email records its outcome only while its own lease stands, so a
-- mailer that was too slow (its lease expired and another mailer took the email over) never overwrites the newer attempt.
alter table emails add column lease_token uuid;

-- Due emails include those `sent` by a mailer that died before recording the outcome (their lease runs out).
drop index emails_due;
create index emails_due on emails (next_attempt_at) where last_event in ('queued', 'sent', 'delivery_delayed');
