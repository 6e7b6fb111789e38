-- The Realtime archive: every stored publication of a namespace with `archive`, kept up to 3650 days
-- (docs/realtime-data-plane.md, "Archive"). Written by the archiver from the shard fan-out streams; read one channel at a
-- time by time range (shared/realtime/archive-read.ts).
--
-- Partitioned by month on published_at: the archiver creates each month's partition ahead of time, and the sweeper
-- drops a month once it is past every retention, instead of deleting its rows one by one. A row whose month has no
-- partition yet (an archiver behind on creating them, a far-off clock) gets it created on demand before its insert
-- (shared/realtime/archive.ts). No default partition: with one, PostgreSQL cannot read the months in order (Ordered
-- Append) and stop at a page's LIMIT; it would read a channel's whole range and sort it.
--
-- The primary key is the entry's identity in its channel, (product, channel, epoch, offset), plus published_at, which
-- PostgreSQL requires of a partitioned table's unique keys. A redelivered fan-out entry carries the same publish time,
-- so `insert ... on conflict do nothing` makes writes idempotent. The key doubles as the index of "channel C, epoch E,
-- offset > N, ascending" (a history cursor recovered from the archive).
create table realtime_archive (
  product_id uuid not null references products (id) on delete cascade,
  -- "C": byte order, so a namespace's channels are one index range ('ns:' <= channel < 'ns;') under any collation.
  channel text collate "C" not null,
  epoch text not null,
  "offset" bigint not null,
  -- The message id the publish carried.
  id text not null,
  published_at timestamptz not null,
  -- Exactly one: the serialized JSON as published, or the payload object's ref (as history answers them).
  data text,
  ref jsonb,
  -- The namespace's retention when the row was written: how long it is kept once the namespace no longer archives.
  retention_days smallint not null check (retention_days between 1 and 3650),
  check ((data is null) <> (ref is null)),
  primary key (product_id, channel, epoch, "offset", published_at)
) partition by range (published_at);

-- Every (product, namespace) that ever had a row archived: how the sweeper finds the rows of namespaces that no
-- longer archive (removed or deleted) without scanning the archive. One row per namespace; gone with the product.
create table realtime_archive_namespaces (
  product_id uuid not null references products (id) on delete cascade,
  namespace text collate "C" not null,
  primary key (product_id, namespace)
);

-- Reads: one channel by time range, newest or oldest first, with a (published_at, epoch, offset) cursor.
create index realtime_archive_by_time on realtime_archive (product_id, channel, published_at, epoch, "offset");
