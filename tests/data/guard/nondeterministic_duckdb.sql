-- Non-deterministic corpus for the guard's `deterministic` check on DuckDB (issue 30):
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

-- title: issue 30: one-argument age
SELECT age(o.ordered_at) AS how_old FROM orders AS o
-- ;;
-- title: one-argument age of a literal
SELECT age(TIMESTAMP '2020-01-01')
-- ;;
-- title: one-argument age in WHERE
SELECT c.customer_id FROM customers AS c WHERE age(c.signup_date) > INTERVAL 1 YEAR
-- ;;
-- title: issue 30: USING SAMPLE percent
SELECT * FROM orders USING SAMPLE 10%
-- ;;
-- title: USING SAMPLE bernoulli
SELECT * FROM orders USING SAMPLE 10 PERCENT (bernoulli)
-- ;;
-- title: USING SAMPLE rows
SELECT * FROM orders USING SAMPLE 5 ROWS
-- ;;
-- title: USING SAMPLE reservoir with a seed
SELECT count(*) FROM orders USING SAMPLE reservoir(5 ROWS) REPEATABLE (42)
-- ;;
-- title: issue 30: TABLESAMPLE reservoir
SELECT * FROM orders TABLESAMPLE reservoir(5)
-- ;;
-- title: TABLESAMPLE system
SELECT * FROM orders TABLESAMPLE system(20%)
-- ;;
-- title: TABLESAMPLE in a subquery
SELECT count(*) FROM (SELECT * FROM orders TABLESAMPLE 10%) AS s
-- ;;
-- title: USING SAMPLE in a CTE
WITH s AS (SELECT * FROM orders USING SAMPLE 50%) SELECT count(*) FROM s
-- ;;
-- title: TABLESAMPLE on a joined table
SELECT o.order_id FROM orders AS o JOIN customers AS c TABLESAMPLE 50% ON o.customer_id = c.customer_id
-- ;;
-- title: issue 30: reservoir_quantile
SELECT reservoir_quantile(o.total, 0.5) FROM orders AS o
-- ;;
-- title: issue 30: approx_count_distinct
SELECT approx_count_distinct(o.customer_id) FROM orders AS o
-- ;;
-- title: approx_quantile
SELECT approx_quantile(o.total, 0.9) FROM orders AS o
-- ;;
-- title: approx_top_k
SELECT approx_top_k(o.status, 3) FROM orders AS o
-- ;;
-- title: list_approx_count_distinct
SELECT list_approx_count_distinct([1, 2, 2])
-- ;;
-- title: approx_count_distinct as a window
SELECT approx_count_distinct(o.customer_id) OVER () FROM orders AS o
-- ;;
-- title: random
SELECT random()
-- ;;
-- title: random in ORDER BY
SELECT * FROM orders ORDER BY random() LIMIT 5
-- ;;
-- title: uuid
SELECT uuid()
-- ;;
-- title: gen_random_uuid
SELECT gen_random_uuid()
-- ;;
-- title: uuidv7
SELECT uuidv7()
-- ;;
-- title: now
SELECT now()
-- ;;
-- title: current_date keyword
SELECT * FROM orders WHERE ordered_at < current_date
-- ;;
-- title: current_timestamp keyword
SELECT current_timestamp
-- ;;
-- title: today
SELECT today()
-- ;;
-- title: get_current_timestamp
SELECT get_current_timestamp()
-- ;;
-- title: transaction_timestamp
SELECT transaction_timestamp()
-- ;;
-- title: ago
SELECT ago(INTERVAL 1 DAY)
-- ;;
-- title: date_diff against now
SELECT date_diff('day', o.ordered_at, now()) FROM orders AS o
-- ;;
-- title: last thirty days
SELECT count(*) FROM orders WHERE ordered_at > now() - INTERVAL 30 DAY
-- ;;
-- title: strftime of current_date
SELECT strftime(current_date, '%Y')
-- ;;
-- title: one-argument age in method-call syntax
SELECT ordered_at.age() FROM orders
