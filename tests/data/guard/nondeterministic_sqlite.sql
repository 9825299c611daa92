-- Non-deterministic corpus for the guard's `deterministic` check on SQLite (issue 30):
-- statements whose result depends on the clock, the machine's time zone or locale, a
-- random or sampling source; the guard must REJECT every one with check `deterministic`.
--
-- Format (as tests/data/guard/hostile.sql):
--   * each entry starts with a line `-- title: <short title>`;
--   * an optional `-- expect: check, check` line gives the exact checks reported, in
--     order; without it the guard must report `deterministic` and nothing else;
--   * the SQL follows, up to a line that holds exactly `-- ;;`, which ends the entry;
--   * lines before the first `-- title:` (this header) are ignored.
-- Published tables passed to guard(): customers, orders, order_items, products, stores,
-- payments, returns, categories, sales, sale_tags (the columns of tests/harness/test_guard.py).

-- title: issue 30: datetime without a value
SELECT datetime()
-- ;;
-- title: issue 30: date without a value
SELECT date()
-- ;;
-- title: issue 30: julianday without a value
SELECT julianday()
-- ;;
-- title: issue 30: unixepoch without a value
SELECT unixepoch()
-- ;;
-- title: time without a value
SELECT time()
-- ;;
-- title: strftime without a value
SELECT strftime('%Y')
-- ;;
-- title: issue 30: 'now' built by concatenation
SELECT date('n' || 'ow')
-- ;;
-- title: issue 30: 'now' from a subquery column
SELECT date(x) FROM (SELECT 'now' AS x)
-- ;;
-- title: issue 30: 'now' cut out of a longer literal
SELECT time(substr('xnow', 2))
-- ;;
-- title: 'now' from a CTE column
WITH c AS (SELECT 'now' AS d) SELECT date(d) FROM c
-- ;;
-- title: 'now' from a qualified subquery column
SELECT date(t.x) FROM (SELECT 'now' AS x) AS t
-- ;;
-- title: 'now' through a union
SELECT julianday(u.x) FROM (SELECT '2020-01-01' AS x UNION ALL SELECT 'now') AS u
-- ;;
-- title: 'now' from a CASE
SELECT date(CASE WHEN 1 = 1 THEN 'n' || 'ow' END)
-- ;;
-- title: 'now' from upper
SELECT date(upper('now'))
-- ;;
-- title: 'now' from replace
SELECT date(replace('nxw', 'x', 'o'))
-- ;;
-- title: 'now' from a scalar subquery
SELECT date((SELECT 'now'))
-- ;;
-- title: strftime of a computed value
SELECT strftime('%s', x) FROM (SELECT 'now' AS x)
-- ;;
-- title: 'now' cut out of a column joined to a word
SELECT date(substr(o.status || 'now', 5)) FROM orders AS o
-- ;;
-- title: 'now' literal
SELECT date('now')
-- ;;
-- title: 'NOW' in capitals
SELECT date('NOW')
-- ;;
-- title: 'now' with spaces
SELECT julianday(' now ') - julianday(o.ordered_at) FROM orders AS o
-- ;;
-- title: strftime of 'now'
SELECT strftime('%Y', 'now')
-- ;;
-- title: unixepoch of 'now'
SELECT unixepoch('now')
-- ;;
-- title: localtime modifier
SELECT date(o.ordered_at, 'localtime') FROM orders AS o
-- ;;
-- title: utc modifier
SELECT datetime(o.ordered_at, 'utc') FROM orders AS o
-- ;;
-- title: a modifier computed at run time
SELECT date(o.ordered_at, m.x) FROM orders AS o, (SELECT 'local' || 'time' AS x) AS m
-- ;;
-- title: a modifier from a scalar subquery
SELECT date(o.ordered_at, (SELECT 'localtime')) FROM orders AS o
-- ;;
-- title: 'now' through coalesce
SELECT date(coalesce(NULL, 'now'))
-- ;;
-- title: an output alias named in WHERE
SELECT 'now' AS d FROM orders WHERE date(d) > '2020-01-01'
-- ;;
-- title: CURRENT_TIMESTAMP
SELECT CURRENT_TIMESTAMP
-- ;;
-- title: CURRENT_DATE
SELECT CURRENT_DATE
-- ;;
-- title: CURRENT_TIME
SELECT CURRENT_TIME
-- ;;
-- title: random
SELECT random()
-- ;;
-- title: randomblob
SELECT hex(randomblob(4))
-- ;;
-- title: random in ORDER BY
SELECT * FROM orders ORDER BY random() LIMIT 3
-- ;;
-- title: 'now' from the query around a correlated subquery
SELECT (SELECT date(v) FROM orders AS o LIMIT 1) AS d FROM (SELECT 'now' AS v) AS x
-- ;;
-- title: 'now' spelled with char()
SELECT date(char(110, 111, 119))
-- ;;
-- title: 'now' spelled with printf
SELECT date(printf('%c%c%c', 110, 111, 119))
-- ;;
-- title: 'now' as a blob cast to text
SELECT date(CAST(x'6e6f77' AS TEXT))
-- ;;
-- title: 'now' named by a CTE's column list
WITH RECURSIVE r(x) AS (SELECT 'now' UNION ALL SELECT x FROM r LIMIT 1) SELECT date(x) FROM r
