-- An email's webhook deliveries (mail_emails_deliveries_list): the mail messages about one email, found by the emailId
-- their payload opens its data with (shared/webhooks/email-deliveries.ts). The payload is text (kept byte for byte) and
-- may hold what jsonb refuses, so the id is read with an anchored pattern, which cannot fail on any payload; a subject
-- quoting the pattern is escaped inside its JSON string and never matches.
create index if not exists webhook_messages_email on webhook_messages (
  product_id, (substring(payload from '^\{"type":"[^"]*","timestamp":"[^"]*","data":\{"emailId":"([0-9a-f-]{36})"'))
) where area = 'mail';
