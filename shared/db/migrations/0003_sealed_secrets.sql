-- Secrets at rest: signing keys are stored sealed (shared/secrets.ts, AES-256-GCM envelope under PLATFORM_SECRET_KEY).
-- Rows written before this migration keep their plain secret until scripts/migrate.ts seals them (sealPlainSecrets):
-- SQL cannot, since the master key is not in the database. Only sealed rows are ever read.
alter table realtime_signing_keys add column secret_sealed bytea;
alter table realtime_signing_keys alter column secret drop not null;
alter table realtime_signing_keys add constraint realtime_signing_keys_one_form check (secret is null or secret_sealed is null);
