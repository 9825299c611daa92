-- Non-deterministic corpus for the guard's `deterministic` check on PostgreSQL (issue 30):
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

-- title: issue 30: 'now' cast to timestamptz
SELECT 'now'::timestamptz
-- ;;
-- title: issue 30: DATE 'today'
SELECT date 'today'
-- ;;
-- title: issue 30: 'tomorrow' cast to date
SELECT 'tomorrow'::date
-- ;;
-- title: issue 30: TIMESTAMPTZ 'now'
SELECT timestamptz 'now'
-- ;;
-- title: issue 30: CAST('now' AS timestamp)
SELECT CAST('now' AS timestamp)
-- ;;
-- title: issue 30: TABLESAMPLE BERNOULLI
SELECT * FROM sales TABLESAMPLE BERNOULLI (10)
-- ;;
-- title: issue 30: TABLESAMPLE SYSTEM
SELECT * FROM sales TABLESAMPLE SYSTEM (10)
-- ;;
-- title: issue 30: AT TIME ZONE 'localtime'
SELECT o.ordered_at AT TIME ZONE 'localtime' FROM orders AS o
-- ;;
-- title: TABLESAMPLE SYSTEM with REPEATABLE
SELECT count(*) FROM sales TABLESAMPLE SYSTEM (50) REPEATABLE (7)
-- ;;
-- title: 'yesterday' cast to timestamp
SELECT 'yesterday'::timestamp
-- ;;
-- title: ' NOW ' with spaces and capitals
SELECT ' NOW '::timestamptz
-- ;;
-- title: 'today 10:00'
SELECT 'today 10:00'::timestamp
-- ;;
-- title: TIMESTAMP 'yesterday'
SELECT timestamp 'yesterday'
-- ;;
-- title: 'now' as time
SELECT 'now'::time
-- ;;
-- title: 'now' in an array
SELECT '{now}'::timestamp[]
-- ;;
-- title: 'today' compared with a date column
SELECT count(*) FROM sales AS s WHERE s.sale_date < 'today'
-- ;;
-- title: 'today' in BETWEEN
SELECT count(*) FROM sales AS s WHERE s.sale_date BETWEEN '2020-01-01' AND 'today'
-- ;;
-- title: function-style date('today')
SELECT date('today')
-- ;;
-- title: 'today' built by concatenation
SELECT ('to' || 'day')::date
-- ;;
-- title: 'today' built by concat()
SELECT CAST(concat('to', 'day') AS date)
-- ;;
-- title: 'now' from a subquery column
SELECT x::timestamptz FROM (SELECT lower('NO') || 'w' AS x) AS t
-- ;;
-- title: 'now' inside date_trunc
SELECT date_trunc('day', 'now'::timestamp)
-- ;;
-- title: 'today' inside extract
SELECT extract(year FROM 'today'::date)
-- ;;
-- title: timezone('localtime', x)
SELECT timezone('localtime', o.ordered_at) FROM orders AS o
-- ;;
-- title: a time zone computed at run time
SELECT o.ordered_at AT TIME ZONE (o.channel || 'time') FROM orders AS o
-- ;;
-- title: one-argument age
SELECT age(s.sale_date) FROM sales AS s
-- ;;
-- title: a cast to money
SELECT s.revenue::money FROM sales AS s
-- ;;
-- title: now
SELECT now()
-- ;;
-- title: current_date
SELECT current_date
-- ;;
-- title: current_time
SELECT current_time
-- ;;
-- title: localtimestamp
SELECT localtimestamp
-- ;;
-- title: clock_timestamp
SELECT clock_timestamp()
-- ;;
-- title: statement_timestamp
SELECT statement_timestamp()
-- ;;
-- title: transaction_timestamp
SELECT transaction_timestamp()
-- ;;
-- title: timeofday
SELECT timeofday()
-- ;;
-- title: random
SELECT random()
-- ;;
-- title: gen_random_uuid
SELECT gen_random_uuid()
-- ;;
-- title: random in ORDER BY
SELECT * FROM sales ORDER BY random() LIMIT 5
-- ;;
-- title: 'today' built inside unnest
SELECT CAST(x AS date) FROM unnest(ARRAY['to' || 'day']) AS t(x)
-- ;;
-- title: to_char with TM (the server's lc_time)
SELECT to_char(o.ordered_at, 'TMMonth YYYY') FROM orders AS o
-- ;;
-- title: to_char with a format computed at run time
SELECT to_char(o.ordered_at, o.channel) FROM orders AS o
-- ;;
-- title: 'now' with an octal escape
SELECT E'\156ow'::timestamptz
-- ;;
-- title: 'today' as a Unicode escape string, compared implicitly
SELECT count(*) FROM sales AS s WHERE s.sale_date < U&'t\006Fday'
-- ;;
-- title: 'today' dollar-quoted
SELECT $$today$$::date
-- ;;
-- title: 'now' spelled with chr()
SELECT (chr(110) || chr(111) || chr(119))::timestamptz
-- ;;
-- title: 'today' named by a derived table's column list
SELECT x::date FROM (SELECT 'to' || 'day') AS t(x)
