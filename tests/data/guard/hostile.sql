-- Hostile corpus for ledger.harness.guard: statements it must REJECT, every one.
--
-- Format (sqlglot golden-file style):
--   * each entry starts with a line `-- title: <short title>`;
--   * optional `-- expect: check, check` lines right after the title give the exact
--     check names the guard reports, in order (a representative subset is annotated);
--   * the SQL follows, up to a line that holds exactly `-- ;;`, which ends the entry;
--   * lines before the first `-- title:` (this header) are ignored;
--   * the SQL text is everything between the title/expect lines and the separator, with
--     leading and trailing blank lines removed.
-- Published tables passed to guard(): customers, orders, order_items, products, stores,
-- payments, returns, categories, sales, sale_tags.

-- title: insert values
-- expect: read_only_root, no_side_effects
INSERT INTO orders VALUES (1, 1, 1, NULL, 'x', 0, 'web')
-- ;;
-- title: insert select
-- expect: read_only_root, no_side_effects
INSERT INTO orders SELECT * FROM orders
-- ;;
-- title: insert or replace
INSERT OR REPLACE INTO customers (customer_id, name) VALUES (1, 'x')
-- ;;
-- title: insert default values
INSERT INTO orders DEFAULT VALUES
-- ;;
-- title: update
-- expect: read_only_root, no_side_effects
UPDATE orders SET total = 0
-- ;;
-- title: update from
UPDATE orders SET total = p.amount FROM payments p WHERE p.order_id = orders.order_id
-- ;;
-- title: delete
-- expect: read_only_root, no_side_effects
DELETE FROM orders
-- ;;
-- title: delete with a where clause
DELETE FROM orders WHERE order_id IN (SELECT order_id FROM returns)
-- ;;
-- title: merge into
MERGE INTO orders USING payments ON orders.order_id = payments.order_id WHEN MATCHED THEN DELETE
-- ;;
-- title: truncate
TRUNCATE orders
-- ;;
-- title: create table
CREATE TABLE x (a INTEGER)
-- ;;
-- title: create temp table as select
CREATE TEMP TABLE x AS SELECT * FROM orders
-- ;;
-- title: create or replace a published table
CREATE OR REPLACE TABLE orders AS SELECT 1 AS a
-- ;;
-- title: create table from a file
CREATE TABLE x AS FROM read_csv('/etc/passwd')
-- ;;
-- title: create view
CREATE VIEW v AS SELECT * FROM orders
-- ;;
-- title: create macro
CREATE MACRO home() AS getenv('HOME')
-- ;;
-- title: create or replace table macro
CREATE OR REPLACE MACRO f(p) AS TABLE SELECT * FROM read_text(p)
-- ;;
-- title: create sequence
CREATE SEQUENCE s
-- ;;
-- title: create secret
CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')
-- ;;
-- title: create index
CREATE INDEX i ON orders (order_id)
-- ;;
-- title: create schema
CREATE SCHEMA evil
-- ;;
-- title: create type
CREATE TYPE mood AS ENUM ('a', 'b')
-- ;;
-- title: drop table
DROP TABLE orders
-- ;;
-- title: drop view if exists
DROP VIEW IF EXISTS v
-- ;;
-- title: drop schema cascade
DROP SCHEMA main CASCADE
-- ;;
-- title: alter table add column
ALTER TABLE orders ADD COLUMN x INTEGER
-- ;;
-- title: alter table rename
ALTER TABLE orders RENAME TO old_orders
-- ;;
-- title: comment on
COMMENT ON TABLE orders IS 'x'
-- ;;
-- title: select into
-- expect: no_side_effects, table_references
SELECT 1 INTO t
-- ;;
-- title: delete hidden in a CTE
-- expect: no_side_effects
WITH x AS (DELETE FROM orders RETURNING *) SELECT * FROM x
-- ;;
-- title: insert hidden in a CTE
WITH x AS (INSERT INTO orders SELECT * FROM orders RETURNING order_id) SELECT count(*) FROM x
-- ;;
-- title: update hidden in a CTE
WITH x AS (UPDATE orders SET total = 0 RETURNING *) SELECT * FROM x
-- ;;
-- title: delete hidden in a nested CTE
WITH a AS (SELECT 1), b AS (WITH c AS (DELETE FROM returns RETURNING *) SELECT * FROM c) SELECT * FROM b
-- ;;
-- title: delete in a subquery
SELECT * FROM (DELETE FROM orders RETURNING *) AS d
-- ;;
-- title: CTE followed by delete
WITH x AS (SELECT 1) DELETE FROM orders
-- ;;
-- title: CTE followed by insert
WITH x AS (SELECT * FROM orders) INSERT INTO orders SELECT * FROM x
-- ;;
-- title: begin
BEGIN
-- ;;
-- title: begin transaction
BEGIN TRANSACTION
-- ;;
-- title: start transaction
START TRANSACTION
-- ;;
-- title: commit
COMMIT
-- ;;
-- title: rollback
ROLLBACK
-- ;;
-- title: abort
ABORT
-- ;;
-- title: attach a file
-- expect: read_only_root, no_side_effects
ATTACH 'x.db'
-- ;;
-- title: attach in-memory
ATTACH ':memory:' AS m
-- ;;
-- title: attach read only
ATTACH '/work/other.duckdb' AS o (READ_ONLY)
-- ;;
-- title: attach if not exists
ATTACH IF NOT EXISTS 'x.db' AS y
-- ;;
-- title: attach a sqlite file
ATTACH 'x.sqlite' (TYPE sqlite)
-- ;;
-- title: detach
DETACH x
-- ;;
-- title: detach database
DETACH DATABASE IF EXISTS x
-- ;;
-- title: use
USE memory
-- ;;
-- title: copy table to a file
COPY orders TO '/tmp/orders.csv'
-- ;;
-- title: copy query to parquet
COPY (SELECT * FROM customers) TO 'c.parquet' (FORMAT parquet)
-- ;;
-- title: copy from a file
COPY orders FROM '/etc/passwd'
-- ;;
-- title: copy from database
COPY FROM DATABASE bank TO other
-- ;;
-- title: export database
-- expect: parse
EXPORT DATABASE 'x'
-- ;;
-- title: export database with options
EXPORT DATABASE '/tmp/dump' (FORMAT parquet)
-- ;;
-- title: import database
IMPORT DATABASE '/tmp/dump'
-- ;;
-- title: install
INSTALL httpfs
-- ;;
-- title: force install
FORCE INSTALL httpfs
-- ;;
-- title: install from community
INSTALL evil FROM community
-- ;;
-- title: load
-- expect: read_only_root, no_side_effects
LOAD httpfs
-- ;;
-- title: load an extension file
LOAD '/tmp/x.duckdb_extension'
-- ;;
-- title: pragma database_list
PRAGMA database_list
-- ;;
-- title: pragma table_info
PRAGMA table_info('orders')
-- ;;
-- title: pragma set
PRAGMA memory_limit = '10GB'
-- ;;
-- title: pragma enable_profiling
PRAGMA enable_profiling
-- ;;
-- title: set enable_external_access
SET enable_external_access = true
-- ;;
-- title: set global
SET GLOBAL memory_limit = '100GB'
-- ;;
-- title: set with TO
SET threads TO 8
-- ;;
-- title: set variable
SET VARIABLE x = 1
-- ;;
-- title: set lock_configuration
SET lock_configuration = false
-- ;;
-- title: set search_path
SET search_path = 'information_schema'
-- ;;
-- title: reset
RESET threads
-- ;;
-- title: reset all
RESET ALL
-- ;;
-- title: call pragma_version
CALL pragma_version()
-- ;;
-- title: call duckdb_settings
CALL duckdb_settings()
-- ;;
-- title: checkpoint
-- expect: read_only_root
CHECKPOINT
-- ;;
-- title: force checkpoint
FORCE CHECKPOINT
-- ;;
-- title: vacuum
VACUUM
-- ;;
-- title: vacuum analyze
VACUUM ANALYZE orders
-- ;;
-- title: analyze
ANALYZE
-- ;;
-- title: summarize
SUMMARIZE orders
-- ;;
-- title: summarize in a subquery
SELECT * FROM (SUMMARIZE orders)
-- ;;
-- title: describe
DESCRIBE orders
-- ;;
-- title: describe in a subquery
FROM (DESCRIBE orders)
-- ;;
-- title: show tables
SHOW TABLES
-- ;;
-- title: show all tables
SHOW ALL TABLES
-- ;;
-- title: show tables in a subquery
SELECT * FROM (SHOW TABLES)
-- ;;
-- title: explain
EXPLAIN SELECT 1
-- ;;
-- title: explain analyze
EXPLAIN ANALYZE SELECT * FROM orders
-- ;;
-- title: prepare
PREPARE p AS SELECT 1
-- ;;
-- title: execute
EXECUTE p
-- ;;
-- title: deallocate
DEALLOCATE p
-- ;;
-- title: read_csv in FROM
-- expect: table_functions, function_allowlist
SELECT * FROM read_csv('/etc/passwd')
-- ;;
-- title: read_csv_auto
FROM read_csv_auto('/etc/passwd', header = false)
-- ;;
-- title: read_csv with a list of files
SELECT * FROM read_csv(['a.csv', 'b.csv'])
-- ;;
-- title: read_csv upper case
SELECT * FROM READ_CSV('/etc/passwd', sep = ':')
-- ;;
-- title: read_csv with a quoted function name
SELECT * FROM "read_csv"('/etc/passwd')
-- ;;
-- title: read_csv main-qualified
SELECT * FROM main.read_csv('/etc/passwd')
-- ;;
-- title: read_csv system-qualified
SELECT * FROM system.main.read_csv('/etc/passwd')
-- ;;
-- title: read_parquet
SELECT * FROM read_parquet('s3://bucket/x.parquet')
-- ;;
-- title: read_json
SELECT * FROM read_json('x.json')
-- ;;
-- title: read_json_auto
SELECT * FROM read_json_auto('x.json')
-- ;;
-- title: read_ndjson
SELECT * FROM read_ndjson('x.ndjson')
-- ;;
-- title: read_text
SELECT content FROM read_text('/etc/passwd')
-- ;;
-- title: read_blob
SELECT content FROM read_blob('/etc/shadow')
-- ;;
-- title: glob
SELECT * FROM glob('/home/*')
-- ;;
-- title: glob aggregated
SELECT list(file) FROM glob('*')
-- ;;
-- title: parquet_scan
SELECT * FROM parquet_scan('x.parquet')
-- ;;
-- title: parquet_metadata
SELECT * FROM parquet_metadata('x.parquet')
-- ;;
-- title: parquet_schema
SELECT * FROM parquet_schema('x.parquet')
-- ;;
-- title: sniff_csv
FROM sniff_csv('/etc/passwd')
-- ;;
-- title: sqlite_scan
SELECT * FROM sqlite_scan('x.db', 'users')
-- ;;
-- title: postgres_scan
SELECT * FROM postgres_scan('host=x', 'public', 't')
-- ;;
-- title: iceberg_scan
SELECT * FROM iceberg_scan('s3://b/t')
-- ;;
-- title: delta_scan
SELECT * FROM delta_scan('s3://b/t')
-- ;;
-- title: duckdb_settings
-- expect: table_functions, function_allowlist
FROM duckdb_settings()
-- ;;
-- title: duckdb_tables
SELECT * FROM duckdb_tables()
-- ;;
-- title: duckdb_columns
SELECT * FROM duckdb_columns() WHERE table_name = 'orders'
-- ;;
-- title: duckdb_databases
SELECT path FROM duckdb_databases()
-- ;;
-- title: duckdb_extensions
SELECT * FROM duckdb_extensions()
-- ;;
-- title: duckdb_secrets
SELECT * FROM duckdb_secrets()
-- ;;
-- title: duckdb_functions main-qualified
SELECT * FROM main.duckdb_functions()
-- ;;
-- title: pragma_table_info
SELECT * FROM pragma_table_info('orders')
-- ;;
-- title: pragma_database_list
SELECT * FROM pragma_database_list()
-- ;;
-- title: query()
SELECT * FROM query('SELECT * FROM read_csv(''/etc/passwd'')')
-- ;;
-- title: query_table
-- expect: table_functions, function_allowlist
SELECT * FROM query_table('orders')
-- ;;
-- title: query_table with a list
SELECT * FROM query_table(['orders', '/etc/passwd'])
-- ;;
-- title: json_execute_serialized_sql
SELECT * FROM json_execute_serialized_sql('{}')
-- ;;
-- title: which_secret
SELECT * FROM which_secret('s3://b/x', 's3')
-- ;;
-- title: checkpoint table function
SELECT * FROM checkpoint()
-- ;;
-- title: test_all_types
SELECT * FROM test_all_types()
-- ;;
-- title: repeat_row is not an allowed table function
SELECT * FROM repeat_row(1, num_rows = 1000000000)
-- ;;
-- title: unknown table function
SELECT * FROM some_extension_reader('x')
-- ;;
-- title: table function in a comma join
-- expect: table_functions, function_allowlist
SELECT * FROM orders, read_text('x')
-- ;;
-- title: table function in an explicit join
SELECT * FROM orders o JOIN read_csv('x.csv') f ON f.id = o.order_id
-- ;;
-- title: table function behind LATERAL
SELECT * FROM orders, LATERAL read_csv('x.csv')
-- ;;
-- title: table function after an allowed range()
SELECT * FROM range(3) r, read_parquet('x.parquet')
-- ;;
-- title: read inside UNNEST
SELECT * FROM unnest((SELECT list(content) FROM read_text('/etc/passwd')))
-- ;;
-- title: read in a scalar subquery
SELECT 1 WHERE 1 = (SELECT count(*) FROM read_parquet('s3://b/x.parquet'))
-- ;;
-- title: read in a union branch
(SELECT 1) UNION (SELECT * FROM read_csv('x.csv'))
-- ;;
-- title: read in a CTE
WITH f AS (SELECT * FROM read_csv('/etc/passwd')) SELECT * FROM f
-- ;;
-- title: pivot over a table function
PIVOT read_csv('x.csv') ON a USING count(*)
-- ;;
-- title: string literal file in FROM
-- expect: file_references
FROM 'x.csv'
-- ;;
-- title: string literal absolute path
SELECT * FROM '/etc/passwd'
-- ;;
-- title: quoted identifier path
-- expect: file_references
SELECT * FROM "/etc/passwd"
-- ;;
-- title: glob pattern in FROM
SELECT * FROM 'data/*.parquet'
-- ;;
-- title: https url in FROM
SELECT * FROM 'https://example.com/x.csv'
-- ;;
-- title: s3 url in FROM
SELECT * FROM 's3://bucket/x.parquet'
-- ;;
-- title: home directory path
SELECT * FROM "~/.ssh/id_rsa"
-- ;;
-- title: relative path to the bank
SELECT * FROM '../bank.duckdb'
-- ;;
-- title: windows path
SELECT * FROM 'C:\data\x.csv'
-- ;;
-- title: file joined to a table
SELECT * FROM 'orders.csv' JOIN orders USING (order_id)
-- ;;
-- title: file in a comma join
SELECT * FROM orders, '/etc/passwd'
-- ;;
-- title: main-qualified quoted file
SELECT * FROM main."x.csv"
-- ;;
-- title: FROM-first file
FROM 'x.csv' SELECT *
-- ;;
-- title: aliased file
SELECT p.* FROM "/etc/passwd" AS p
-- ;;
-- title: pivot over a file
PIVOT 'x.csv' ON a USING count(*)
-- ;;
-- title: unpivot over a file
UNPIVOT "/etc/passwd" ON a, b INTO NAME k VALUE v
-- ;;
-- title: CTE named like a file reads the file (non-recursive self reference)
WITH "/etc/passwd" AS (SELECT * FROM "/etc/passwd") SELECT * FROM "/etc/passwd"
-- ;;
-- title: recursive CTE without union reads the file
WITH RECURSIVE "x.csv" AS (SELECT * FROM "x.csv") SELECT * FROM "x.csv"
-- ;;
-- title: recursive CTE whose anchor references itself
-- expect: table_references
WITH RECURSIVE r(a) AS (SELECT a FROM r UNION SELECT 1) SELECT * FROM r
-- ;;
-- title: CTE referencing a later CTE named like a file
WITH a AS (SELECT * FROM "b.csv"), "b.csv" AS (SELECT 1) SELECT * FROM a
-- ;;
-- title: CTE name used outside its scope
SELECT * FROM (WITH q AS (SELECT 1) SELECT * FROM q), q
-- ;;
-- title: CTE-named file used outside its scope
SELECT * FROM (WITH "x.csv" AS (SELECT 1) SELECT * FROM "x.csv"), "x.csv"
-- ;;
-- title: main-qualified name of a CTE is not the CTE
WITH x AS (SELECT 1) SELECT * FROM main.x
-- ;;
-- title: getenv
-- expect: function_allowlist
SELECT getenv('HOME')
-- ;;
-- title: getenv upper case
SELECT GETENV('HOME')
-- ;;
-- title: getenv with a quoted name
SELECT "getenv"('HOME')
-- ;;
-- title: getenv system-qualified
SELECT system.main.getenv('HOME')
-- ;;
-- title: getenv in WHERE
SELECT * FROM orders WHERE getenv('HOME') IS NOT NULL
-- ;;
-- title: getenv in a lambda
SELECT list_transform(['HOME', 'PATH'], x -> getenv(x))
-- ;;
-- title: getenv in a list comprehension
SELECT [getenv(x) FOR x IN ['HOME']]
-- ;;
-- title: getenv in a struct
SELECT struct_pack(h := getenv('HOME'))
-- ;;
-- title: getenv in CASE
SELECT CASE WHEN true THEN getenv('HOME') END
-- ;;
-- title: getenv in VALUES
VALUES (getenv('HOME'))
-- ;;
-- title: getenv in QUALIFY
SELECT * FROM orders QUALIFY getenv('A') = ''
-- ;;
-- title: current_setting
-- expect: function_allowlist
SELECT current_setting('home_directory')
-- ;;
-- title: current_setting pg_catalog-qualified
SELECT pg_catalog.current_setting('temp_directory')
-- ;;
-- title: getvariable
SELECT getvariable('x')
-- ;;
-- title: read_text in the select list
SELECT read_text('/etc/passwd')
-- ;;
-- title: read_text in a lambda
SELECT list_transform(['/etc/passwd'], x -> read_text(x))
-- ;;
-- title: read_blob in ORDER BY
SELECT * FROM orders ORDER BY read_blob('x')
-- ;;
-- title: glob in a FILTER clause
SELECT count(*) FILTER (WHERE glob('x') IS NULL) FROM orders
-- ;;
-- title: glob scalar
SELECT glob('/etc/*')
-- ;;
-- title: sniff_csv scalar
SELECT sniff_csv('/etc/passwd')
-- ;;
-- title: current_database
SELECT current_database()
-- ;;
-- title: current_schema
SELECT current_schema()
-- ;;
-- title: version
SELECT version()
-- ;;
-- title: nextval writes a sequence
SELECT nextval('s')
-- ;;
-- title: setseed changes the session
SELECT setseed(0.5)
-- ;;
-- title: has_table_privilege
SELECT has_table_privilege('orders', 'SELECT')
-- ;;
-- title: pg_get_viewdef
SELECT pg_get_viewdef('v')
-- ;;
-- title: duckdb scalar in a correlated subquery
SELECT (SELECT count(*) FROM duckdb_tables()) AS n FROM orders
-- ;;
-- title: getenv behind LATERAL
SELECT * FROM range(10) AS r, LATERAL (SELECT getenv('HOME'))
-- ;;
-- title: information_schema.tables
-- expect: table_references
SELECT * FROM information_schema.tables
-- ;;
-- title: main.information_schema.tables
SELECT * FROM main.information_schema.tables
-- ;;
-- title: information_schema upper case and quoted
SELECT * FROM "INFORMATION_SCHEMA"."TABLES"
-- ;;
-- title: information_schema.columns
SELECT column_name FROM information_schema.columns WHERE table_name = 'orders'
-- ;;
-- title: pg_catalog.pg_tables
SELECT * FROM pg_catalog.pg_tables
-- ;;
-- title: bare pg_tables view
SELECT * FROM pg_tables
-- ;;
-- title: bare duckdb_settings view
SELECT * FROM duckdb_settings
-- ;;
-- title: sqlite_master
SELECT * FROM sqlite_master
-- ;;
-- title: system catalog
SELECT * FROM system.main.duckdb_settings
-- ;;
-- title: temp catalog
SELECT * FROM temp.main.x
-- ;;
-- title: another catalog with a published table name
SELECT * FROM memory.main.orders
-- ;;
-- title: database-qualified published table
SELECT * FROM bank.main.orders
-- ;;
-- title: another schema
SELECT * FROM other.orders
-- ;;
-- title: unknown table
SELECT * FROM secrets
-- ;;
-- title: two statements
-- expect: single_statement
SELECT 1; DROP TABLE orders
-- ;;
-- title: two selects
SELECT 1;SELECT 2
-- ;;
-- title: select then attach
SELECT 1; ATTACH 'x.db'
-- ;;
-- title: empty statement between
SELECT 1;; DELETE FROM orders
-- ;;
-- title: block comment then a second statement
SELECT 1 /* harmless */; DELETE FROM orders
-- ;;
-- title: line comment then a second statement
SELECT 1 -- comment
; DROP TABLE orders
-- ;;
-- title: nested block comments then a second statement
SELECT 1 /* a /* b */ c */; DROP TABLE orders
-- ;;
-- title: statement hidden after a comment with a semicolon
/* ; */ DROP TABLE orders
-- ;;
-- title: backslash is not an escape in DuckDB strings
SELECT '\'; DROP TABLE orders; --'
-- ;;
-- title: escape string then a second statement
SELECT E'\\'; DROP TABLE orders
-- ;;
-- title: dollar quote then a second statement
SELECT $$x$$; DELETE FROM orders
-- ;;
-- title: line comment swallowing the select keyword
SELECT 1 --
DROP TABLE orders
-- ;;
-- title: unterminated comment
SELECT 1 /* DROP TABLE orders
-- ;;
-- title: unterminated string
SELECT 'abc
-- ;;
-- title: only a comment
-- expect: single_statement
/* nothing here */
-- ;;
-- title: only semicolons
-- expect: single_statement
; ;
-- ;;
-- title: cyrillic e in a table name
-- expect: table_references
SELECT * FROM ordеrs
-- ;;
-- title: cyrillic es in a table name
SELECT * FROM сustomers
-- ;;
-- title: long s folds to s only under Unicode casefolding
SELECT * FROM customerſ
-- ;;
-- title: full-width table name
SELECT * FROM ＯＲＤＥＲＳ
-- ;;
-- title: zero-width space inside a quoted table name
SELECT * FROM "orders​"
-- ;;
-- title: full-width DROP
ＤＲＯＰ TABLE orders
-- ;;
-- title: full-width SELECT of a file
ＳＥＬＥＣＴ * FROM '/etc/passwd'
-- ;;
-- title: cyrillic a in read_csv is still not an allowed table function
SELECT * FROM reаd_csv('/etc/passwd')
-- ;;
-- title: unicode escape string naming a file
SELECT * FROM U&'\002Fetc\002Fpasswd'
-- ;;
-- title: positional placeholder
-- expect: known_constructs
SELECT ?
-- ;;
-- title: numbered parameter
SELECT $1
-- ;;
-- title: locking clause
-- expect: no_side_effects
SELECT * FROM orders FOR UPDATE
-- ;;
-- title: time travel
SELECT * FROM orders AT (VERSION => 1)
-- ;;
-- title: summarize a query
SUMMARIZE SELECT * FROM orders
-- ;;
-- title: set then read a file
SET enable_external_access = true; SELECT * FROM '/etc/passwd'
-- ;;
-- title: spatial st_read
SELECT * FROM st_read('x.shp')
-- ;;
-- title: load then st_read
LOAD spatial; SELECT * FROM st_read('x.shp')
-- ;;
-- title: http_get
SELECT http_get('https://example.com')
-- ;;
-- title: to_file-like function
SELECT to_file('x')
-- ;;
-- title: json_execute_serialized_sql scalar position
SELECT json_execute_serialized_sql('{}')
-- ;;
-- title: query() in a scalar subquery
SELECT (SELECT * FROM query('SELECT 1'))
-- ;;
-- title: range qualified with a catalog
SELECT * FROM system.main.range(3) AS r, '/etc/passwd'
-- ;;
-- title: values joined to a file
SELECT * FROM (VALUES (1)) v(a), 'x.parquet'
-- ;;
-- title: generate_series with a read in the argument
SELECT * FROM generate_series(1, (SELECT count(*) FROM read_csv('x.csv')))
-- ;;
-- title: TABLE statement over a quoted path
-- expect: file_references
TABLE "/etc/passwd"
-- ;;
-- title: TABLE statement over a string literal file
TABLE 'x.csv'
-- ;;
-- title: FROM ONLY a file
SELECT * FROM ONLY "x.csv"
-- ;;
-- title: file joined inside the recursive term
WITH RECURSIVE r AS (SELECT 1 AS a UNION ALL SELECT r.a FROM r, "x.csv" WHERE r.a < 3) SELECT * FROM r
-- ;;
-- title: method-call syntax for getenv
SELECT 'HOME'.getenv()
-- ;;
-- title: FROM-first subquery reading a file in IN
SELECT * FROM orders WHERE order_id IN (FROM read_csv('x.csv'))
-- ;;
-- title: adjacent literals across a newline name a file in FROM
-- expect: adjacent_literals, file_references
SELECT * FROM 'orders'
'.csv'
-- ;;
-- title: adjacent literals across a line comment name a file in JOIN
SELECT * FROM orders JOIN 'orders' -- joined by DuckDB
'.csv' ON true
-- ;;
-- title: adjacent literals in a subquery
SELECT * FROM (SELECT * FROM 'orders'
'.csv') AS s
-- ;;
-- title: adjacent literals in a CTE body
WITH c AS (SELECT * FROM 'orders'
'.csv') SELECT * FROM c
-- ;;
-- title: adjacent literals in a PIVOT source
PIVOT 'orders'
'.csv' ON status IN ('paid') USING count(*)
-- ;;
-- title: adjacent literals in an UNPIVOT source
UNPIVOT 'orders'
'.csv' ON total INTO NAME k VALUE v
-- ;;
-- title: adjacent literals after UNION BY NAME
SELECT * FROM orders UNION BY NAME SELECT * FROM 'orders'
'.csv'
-- ;;
-- title: three adjacent literals in the select list
-- expect: adjacent_literals
SELECT 'a'
'b'
'c'
-- ;;
-- title: a string literal in FROM is a file read even when it names a table
-- expect: file_references
SELECT * FROM 'orders'
-- ;;
-- title: a string literal in a comma join
SELECT * FROM customers, 'orders'
-- ;;
-- title: json_serialize_plan runs the binder on SQL text
-- expect: function_allowlist
SELECT json_serialize_plan('SELECT current_setting(''home_directory'')')
-- ;;
-- title: json_serialize_sql of a settings query
SELECT json_serialize_sql('SELECT current_setting(''temp_directory'')')
-- ;;
-- title: json_deserialize_sql
SELECT json_deserialize_sql(json_serialize_sql('SELECT 1'))
-- ;;
-- title: json_serialize_plan nested in a CASE
SELECT CASE WHEN total > 0 THEN json_serialize_plan('SELECT * FROM duckdb_databases()') END FROM orders
-- ;;
-- title: query_table scalar position
SELECT (SELECT count(*) FROM query_table('orders'))
-- ;;
-- title: current_setting of the secret directory
SELECT current_setting('secret_directory')
-- ;;
-- title: current_setting main-qualified
SELECT main.current_setting('home_directory')
-- ;;
-- title: current_schemas
SELECT current_schemas(true)
-- ;;
-- title: current_catalog names the database file
SELECT current_catalog()
-- ;;
-- title: bare current_catalog
SELECT current_catalog
-- ;;
-- title: bare current_schema
-- expect: function_allowlist
SELECT current_schema
-- ;;
-- title: bare user
SELECT user
-- ;;
-- title: bare current_role in WHERE
SELECT * FROM orders WHERE current_role IS NOT NULL
-- ;;
-- title: current_query returns the statement
SELECT current_query()
-- ;;
-- title: pg_typeof is catalog compatibility
SELECT pg_typeof(1)
-- ;;
-- title: in_search_path
SELECT in_search_path('memory', 'main')
-- ;;
-- title: write_log
SELECT write_log('x')
-- ;;
-- title: duckdb_databases reveals the bank path
SELECT path FROM duckdb_databases()
-- ;;
-- title: system-qualified duckdb_databases
SELECT * FROM system.main.duckdb_databases()
-- ;;
-- title: inet_client_addr
SELECT inet_client_addr()
-- ;;
-- title: now is a clock
SELECT now()
-- ;;
-- title: current_timestamp is a clock
SELECT current_timestamp
-- ;;
-- title: current_date is a clock
SELECT * FROM orders WHERE ordered_at < current_date
-- ;;
-- title: today is a clock
SELECT today()
-- ;;
-- title: get_current_timestamp
SELECT get_current_timestamp()
-- ;;
-- title: transaction_timestamp
SELECT transaction_timestamp()
-- ;;
-- title: localtimestamp
SELECT localtimestamp
-- ;;
-- title: ago is now minus an interval
SELECT ago(INTERVAL 1 DAY)
-- ;;
-- title: random
SELECT random()
-- ;;
-- title: uuid
SELECT uuid()
-- ;;
-- title: gen_random_uuid
SELECT gen_random_uuid()
-- ;;
-- title: sleep_ms stalls the worker
SELECT sleep_ms(100000)
-- ;;
-- title: random in ORDER BY
SELECT * FROM orders ORDER BY random()
-- ;;
-- title: unknown function is refused
-- expect: function_allowlist
SELECT no_such_function(1)
-- ;;
-- title: PIVOT without an IN list runs a second statement
-- expect: pivot_values
PIVOT orders ON status USING count(*)
-- ;;
-- title: PIVOT subquery without an IN list
SELECT * FROM (PIVOT orders ON status USING count(*))
-- ;;
-- title: function qualified with the system catalog
SELECT system.main.current_setting('home_directory')
