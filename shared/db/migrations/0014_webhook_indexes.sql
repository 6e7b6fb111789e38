-- Indexes behind the webhook tables' foreign keys, and claims counted (issue 22, review). Deleting a delivery sets `replay_of` to null in
-- the deliveries that replay it: without an index that is a scan of every delivery for each one deleted (an endpoint
-- with 19 000 deliveries took 4.7 s to delete, past DB_TIMEOUT_MS, and the retention sweep stalled). Deleting a
-- product deletes its messages: webhook_messages_dedupe covers product_id only where a dedupe key is set.
create index webhook_deliveries_replay_of on webhook_deliveries (replay_of) where replay_of is not null;
create index webhook_messages_product on webhook_messages (product_id);

-- Claims since the last recorded attempt (counted at claim time): a delivery whose attempt keeps stopping its process
-- (a poison delivery) is recorded as failed after a few, instead of being claimed again for ever.
alter table webhook_deliveries add column claims int not null default 0;
