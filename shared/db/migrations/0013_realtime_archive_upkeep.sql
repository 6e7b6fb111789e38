-- The Realtime archive's upkeep (docs/realtime-data-plane.md, "Archive", "Retention"):
--
-- purge_before: set when the namespace is deleted (shared/realtime/archive.ts markNamespaceDeleted). Rows published
-- before it are never answered (a namespace created again under the same name starts empty) and the sweeper deletes
-- them in batches.
alter table realtime_archive_namespaces add column purge_before timestamptz;

-- The longest retention any row of a month partition was written with, kept up to date by the writers: the sweeper
-- reads it to decide whether the month can be dropped, instead of scanning the partition. A partition without a row
-- here (made before this table) is scanned once and recorded.
create table realtime_archive_partitions (
  name text collate "C" primary key,
  retention_days smallint not null check (retention_days between 0 and 3650)
);
