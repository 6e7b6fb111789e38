-- Platform accounts: users, organizations with members, products, login sessions, platform API keys.
create table users (
  id uuid primary key default gen_random_uuid(),
  email text not null,
  name text,
  password_hash text not null,
  created_at timestamptz not null default now()
);
create unique index users_email_key on users (lower(email));

create table organizations (
  id uuid primary key default gen_random_uuid(),
  name text not null,
  created_at timestamptz not null default now()
);

create table organization_members (
  organization_id uuid not null references organizations (id) on delete cascade,
  user_id uuid not null references users (id) on delete cascade,
  role text not null check (role in ('owner', 'member')),
  created_at timestamptz not null default now(),
  primary key (organization_id, user_id)
);
create index organization_members_user on organization_members (user_id);

create table products (
  id uuid primary key default gen_random_uuid(),
  organization_id uuid not null references organizations (id) on delete cascade,
  name text not null,
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now()
);
create index products_organization on products (organization_id);

create table sessions (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references users (id) on delete cascade,
  token_hash bytea not null unique,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz
);

create table platform_keys (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  name text not null,
  areas text[] not null,
  prefix text not null,
  key_hash bytea not null unique,
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index platform_keys_product on platform_keys (product_id) where revoked_at is null;
