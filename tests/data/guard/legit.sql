-- Legitimate corpus for ledger.harness.guard: read-only DuckDB queries it must ACCEPT.
--
-- Format (sqlglot golden-file style):
--   * each entry starts with a line `-- title: <short title>`;
--   * the SQL follows, up to a line that holds exactly `-- ;;`, which ends the entry;
--   * lines before the first `-- title:` (this header) are ignored;
--   * the SQL text is everything between the title line and the separator, with
--     leading and trailing blank lines removed.
-- Tables (tests/harness/test_guard.py creates them empty in a real DuckDB and runs every
-- entry read-only): customers, orders, order_items, products, stores, payments, returns,
-- categories, sales, sale_tags.

-- title: plain select
SELECT customer_id, name FROM customers
-- ;;
-- title: trailing semicolon
SELECT count(*) FROM orders;
-- ;;
-- title: main-qualified table
SELECT o.order_id FROM main.orders AS o
-- ;;
-- title: upper-case and quoted table names resolve case-insensitively
SELECT * FROM "Customers" JOIN ORDERS USING (customer_id)
-- ;;
-- title: FROM-first syntax
FROM orders SELECT order_id, total WHERE status = 'paid'
-- ;;
-- title: bare FROM
FROM products
-- ;;
-- title: inner and left joins
SELECT c.name, o.order_id, p.amount
FROM customers c
JOIN orders o ON o.customer_id = c.customer_id
LEFT JOIN payments p ON p.order_id = o.order_id
-- ;;
-- title: left outer join with coalesce
SELECT c.customer_id, coalesce(sum(o.total), 0) AS spent
FROM customers AS c LEFT OUTER JOIN orders AS o ON o.customer_id = c.customer_id
GROUP BY c.customer_id
-- ;;
-- title: full outer, right and cross joins
SELECT s.store_id, st.name
FROM sales s FULL OUTER JOIN stores st ON st.store_id = s.store_id
RIGHT JOIN categories cat ON TRUE
CROSS JOIN (SELECT 1 AS one) x
-- ;;
-- title: semi and anti joins
SELECT * FROM customers SEMI JOIN orders USING (customer_id)
UNION ALL
SELECT * FROM customers ANTI JOIN orders USING (customer_id)
-- ;;
-- title: asof join
SELECT o.order_id, p.amount
FROM orders o ASOF JOIN payments p ON o.order_id = p.order_id AND o.ordered_at >= p.paid_at
-- ;;
-- title: positional join
SELECT * FROM (SELECT 1 AS a) POSITIONAL JOIN (SELECT 2 AS b)
-- ;;
-- title: simple CTE
WITH paid AS (SELECT * FROM orders WHERE status = 'paid')
SELECT customer_id, sum(total) AS revenue FROM paid GROUP BY customer_id
-- ;;
-- title: chained CTEs
WITH a AS (SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id),
     b AS (SELECT * FROM a WHERE n > 1)
SELECT c.name, b.n FROM b JOIN customers c USING (customer_id)
-- ;;
-- title: CTE shadowing a real table
WITH orders AS (SELECT * FROM main.orders WHERE status <> 'cancelled')
SELECT count(*) FROM orders
-- ;;
-- title: materialized CTE
WITH totals AS MATERIALIZED (SELECT order_id, sum(quantity) AS q FROM order_items GROUP BY order_id)
SELECT max(q) FROM totals
-- ;;
-- title: CTE used in both branches of a union
WITH x AS (SELECT product_id FROM order_items)
SELECT product_id FROM x UNION SELECT product_id FROM products WHERE product_id NOT IN (SELECT product_id FROM x)
-- ;;
-- title: nested WITH inside a subquery
SELECT * FROM (WITH inner_cte AS (SELECT store_id FROM stores) SELECT * FROM inner_cte) AS s
-- ;;
-- title: recursive CTE counting to ten
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10)
SELECT sum(i) FROM n
-- ;;
-- title: recursive CTE over a category tree
WITH RECURSIVE tree AS (
  SELECT category_id, parent_id, name, 0 AS depth FROM categories WHERE parent_id IS NULL
  UNION ALL
  SELECT c.category_id, c.parent_id, c.name, t.depth + 1
  FROM categories c JOIN tree t ON c.parent_id = t.category_id
)
SELECT * FROM tree ORDER BY depth, name
-- ;;
-- title: recursive referral chain with a guard depth
WITH RECURSIVE chain(customer_id, root, depth) AS (
  SELECT customer_id, customer_id, 0 FROM customers WHERE referred_by IS NULL
  UNION
  SELECT c.customer_id, chain.root, chain.depth + 1
  FROM customers AS c JOIN chain ON c.referred_by = chain.customer_id
  WHERE chain.depth < 20
)
SELECT root, count(*) FROM chain GROUP BY root
-- ;;
-- title: window functions
SELECT order_id, customer_id, total,
       row_number() OVER (PARTITION BY customer_id ORDER BY ordered_at) AS rn,
       sum(total) OVER (PARTITION BY customer_id ORDER BY ordered_at
                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running,
       lag(total) OVER (PARTITION BY customer_id ORDER BY ordered_at) AS prev_total
FROM orders
-- ;;
-- title: named window
SELECT sale_id, rank() OVER w, dense_rank() OVER w, percent_rank() OVER w
FROM sales WINDOW w AS (PARTITION BY region ORDER BY revenue DESC)
-- ;;
-- title: range frame with interval
SELECT sale_date, avg(revenue) OVER (ORDER BY sale_date RANGE BETWEEN INTERVAL 6 DAY PRECEDING AND CURRENT ROW)
FROM sales
-- ;;
-- title: QUALIFY top one per group
SELECT customer_id, order_id, total FROM orders
QUALIFY row_number() OVER (PARTITION BY customer_id ORDER BY total DESC) = 1
-- ;;
-- title: GROUPING SETS
SELECT region, quarter, sum(revenue) FROM sales GROUP BY GROUPING SETS ((region, quarter), (region), ())
-- ;;
-- title: ROLLUP with grouping()
SELECT region, quarter, grouping(region, quarter) AS g, sum(revenue) FROM sales GROUP BY ROLLUP (region, quarter)
-- ;;
-- title: CUBE
SELECT region, quarter, sum(quantity) FROM sales GROUP BY CUBE (region, quarter)
-- ;;
-- title: GROUP BY ALL and ORDER BY ALL
SELECT region, count(*) FROM sales GROUP BY ALL ORDER BY ALL
-- ;;
-- title: HAVING
SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id HAVING count(*) >= 3
-- ;;
-- title: aggregate FILTER clauses
SELECT count(*) FILTER (WHERE status = 'paid') AS paid,
       sum(total) FILTER (WHERE channel = 'web') AS web_total
FROM orders
-- ;;
-- title: count distinct and conditional aggregation
SELECT store_id, count(DISTINCT customer_id), sum(CASE WHEN status = 'refunded' THEN 1 ELSE 0 END)
FROM orders GROUP BY store_id
-- ;;
-- title: ordered aggregates
SELECT customer_id, string_agg(status, ',' ORDER BY ordered_at), list(order_id ORDER BY order_id DESC)
FROM orders GROUP BY customer_id
-- ;;
-- title: arg_max and median
SELECT region, arg_max(product_id, revenue), median(revenue), quantile_cont(revenue, 0.9) FROM sales GROUP BY region
-- ;;
-- title: UNNEST of a literal list in FROM
SELECT x FROM unnest([1, 2, 3]) AS t(x)
-- ;;
-- title: UNNEST in the select list
SELECT unnest(['a', 'b', 'c']) AS letter
-- ;;
-- title: UNNEST of a list column
SELECT product_id, unnest(tags) AS tag FROM products
-- ;;
-- title: LATERAL subquery
SELECT c.customer_id, last.total
FROM customers c, LATERAL (SELECT o.total FROM orders o WHERE o.customer_id = c.customer_id
                           ORDER BY o.ordered_at DESC LIMIT 1) AS last
-- ;;
-- title: JOIN LATERAL
SELECT s.store_id, top.product_id
FROM stores s JOIN LATERAL (SELECT product_id FROM sales x WHERE x.store_id = s.store_id
                            ORDER BY revenue DESC LIMIT 3) top ON TRUE
-- ;;
-- title: PIVOT statement with IN list
PIVOT sales ON quarter IN ('Q1', 'Q2', 'Q3', 'Q4') USING sum(revenue) GROUP BY region
-- ;;
-- title: PIVOT statement on two columns, each with its IN list
PIVOT sales ON region IN ('north', 'south'), quarter IN ('Q1', 'Q2') USING count(*)
-- ;;
-- title: SQL-standard PIVOT in FROM
SELECT * FROM (SELECT region, quarter, revenue FROM sales)
PIVOT (sum(revenue) FOR quarter IN ('Q1', 'Q2', 'Q3', 'Q4'))
-- ;;
-- title: UNPIVOT statement
UNPIVOT (SELECT store_id, 1 AS jan, 2 AS feb FROM stores) ON jan, feb INTO NAME month VALUE amount
-- ;;
-- title: PIVOT over a CTE
WITH s AS (SELECT region, quarter, revenue FROM sales)
PIVOT s ON quarter IN ('Q1', 'Q2') USING sum(revenue)
-- ;;
-- title: correlated subquery in SELECT
SELECT c.customer_id,
       (SELECT max(o.total) FROM orders o WHERE o.customer_id = c.customer_id) AS biggest
FROM customers c
-- ;;
-- title: correlated EXISTS
SELECT * FROM products p WHERE EXISTS (SELECT 1 FROM order_items i WHERE i.product_id = p.product_id)
-- ;;
-- title: NOT EXISTS
SELECT c.* FROM customers c
WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id)
-- ;;
-- title: NOT IN and scalar comparison subquery
SELECT product_id FROM products
WHERE product_id NOT IN (SELECT product_id FROM returns WHERE product_id IS NOT NULL)
  AND price > (SELECT avg(price) FROM products)
-- ;;
-- title: ANY and ALL
SELECT * FROM products WHERE price > ALL (SELECT cost FROM products) OR price = ANY (SELECT 1.0)
-- ;;
-- title: UNION, INTERSECT, EXCEPT
(SELECT customer_id FROM orders INTERSECT SELECT customer_id FROM customers)
EXCEPT
SELECT customer_id FROM customers WHERE country = 'NZ'
UNION ALL
SELECT 0
-- ;;
-- title: UNION BY NAME
SELECT 1 AS a, 2 AS b UNION ALL BY NAME SELECT 3 AS b, 4 AS a
-- ;;
-- title: VALUES at the root
VALUES (1, 'one'), (2, 'two')
-- ;;
-- title: VALUES in FROM
SELECT v.id, v.label FROM (VALUES (1, 'low'), (2, 'high')) AS v(id, label)
-- ;;
-- title: range() calendar spine with left join
SELECT cal.day, coalesce(sum(s.revenue), 0) AS revenue
FROM range(DATE '2024-01-01', DATE '2024-02-01', INTERVAL 1 DAY) AS cal(day)
LEFT JOIN sales s ON s.sale_date = cal.day
GROUP BY cal.day ORDER BY cal.day
-- ;;
-- title: generate_series month spine
SELECT m.month::DATE AS month
FROM generate_series(TIMESTAMP '2024-01-01', TIMESTAMP '2024-12-01', INTERVAL 1 MONTH) AS m(month)
-- ;;
-- title: integer range
SELECT * FROM range(5)
-- ;;
-- title: generate_series in the select list
SELECT unnest(generate_series(1, 3)) AS n
-- ;;
-- title: list and struct literals
SELECT [1, 2, 3] AS l, {'k': 'v', 'n': 1} AS s, list_value(1, 2), struct_pack(a := 1) AS sp
-- ;;
-- title: list lambdas and comprehension
SELECT list_transform([1, 2, 3], x -> x * 2), list_filter([1, 2, 3], x -> x > 1), [y + 1 FOR y IN [1, 2]]
-- ;;
-- title: struct field access and list indexing
SELECT attrs.color, attrs['size'], tags[1], tags[1:2], len(tags) FROM products
-- ;;
-- title: date arithmetic
SELECT order_id,
       ordered_at::DATE + INTERVAL 30 DAY AS due,
       date_diff('day', ordered_at, TIMESTAMP '2026-12-31 00:00:00') AS age_days,
       ordered_at - INTERVAL '1 hour' AS earlier,
       DATE '2024-03-01' - DATE '2024-02-01' AS days
FROM orders
-- ;;
-- title: date functions
SELECT date_trunc('month', ordered_at) AS m, extract(year FROM ordered_at) AS y,
       strftime(ordered_at, '%Y-%m') AS ym, dayofweek(ordered_at), last_day(ordered_at::DATE)
FROM orders
-- ;;
-- title: time zone conversion
SELECT paid_at AT TIME ZONE 'UTC', date_part('hour', paid_at) FROM payments
-- ;;
-- title: string functions and patterns
SELECT upper(name), lower(email), regexp_matches(email, '@example\.com$'), split_part(email, '@', 2),
       name LIKE 'A%', name ILIKE '%son', concat_ws(' ', city, country), name || '!' AS bang
FROM customers WHERE email SIMILAR TO '.*@.*' OR name GLOB 'B*'
-- ;;
-- title: CASE, casts and try_cast
SELECT CASE WHEN price > 100 THEN 'high' WHEN price > 10 THEN 'mid' ELSE 'low' END AS band,
       CAST(price AS INTEGER), try_cast('x' AS INTEGER), price::DOUBLE, round(price * 1.1, 2)
FROM products
-- ;;
-- title: SELECT * EXCLUDE and REPLACE, COLUMNS
SELECT * EXCLUDE (email) REPLACE (upper(name) AS name) FROM customers
-- ;;
-- title: COLUMNS expression
SELECT max(COLUMNS('price|cost')) FROM products
-- ;;
-- title: DISTINCT ON
SELECT DISTINCT ON (customer_id) customer_id, order_id FROM orders ORDER BY customer_id, ordered_at DESC
-- ;;
-- title: ORDER BY with NULLS, LIMIT and OFFSET
SELECT * FROM orders ORDER BY total DESC NULLS LAST, order_id LIMIT 10 OFFSET 5
-- ;;
-- title: comments and a semicolon inside a string
/* monthly revenue; note the ';' below */
SELECT 'a; DROP TABLE orders; --' AS s, count(*) -- trailing comment; still one statement
FROM orders
-- ;;
-- title: dollar-quoted string
SELECT $$it's fine; really$$ AS s
-- ;;
-- title: nested subqueries in FROM
SELECT region, avg(rev) FROM (SELECT region, store_id, sum(revenue) AS rev FROM sales GROUP BY ALL) AS x GROUP BY region
-- ;;
-- title: many-table join with sale tags
SELECT st.name, cat.name, count(DISTINCT t.tag)
FROM sales s
JOIN stores st USING (store_id)
JOIN products p USING (product_id)
JOIN categories cat ON cat.category_id = p.category_id
LEFT JOIN sale_tags t ON t.sale_id = s.sale_id
GROUP BY st.name, cat.name
-- ;;
-- title: returns per reason with percent share
SELECT reason, count(*) AS n, round(100.0 * count(*) / sum(count(*)) OVER (), 2) AS pct
FROM returns GROUP BY reason ORDER BY n DESC
-- ;;
-- title: json-free numeric functions
SELECT abs(-1), greatest(1, 2), least(3, 4), sqrt(16), pow(2, 10), 7 // 2, 7 % 2, nullif(1, 1), ln(2.0)
-- ;;
-- title: BETWEEN, IN list and IS DISTINCT FROM
SELECT * FROM orders
WHERE ordered_at BETWEEN TIMESTAMP '2024-01-01' AND TIMESTAMP '2024-12-31 23:59:59'
  AND status IN ('paid', 'shipped') AND channel IS DISTINCT FROM 'phone'
-- ;;
-- title: parenthesised query
(SELECT 1 AS one)
-- ;;
-- title: cumulative distribution with ntile
SELECT customer_id, ntile(4) OVER (ORDER BY total) AS quartile, cume_dist() OVER (ORDER BY total) FROM orders
-- ;;
-- title: first_value and last_value with IGNORE NULLS
SELECT first_value(total IGNORE NULLS) OVER (ORDER BY ordered_at), last_value(total) OVER (ORDER BY ordered_at) FROM orders
-- ;;
-- title: returns and order_items with lateral unnest of a generated list
SELECT r.return_id, g.n FROM returns r, unnest(range(1, 3)) AS g(n)
-- ;;
-- title: week spine from generate_series with date_trunc
WITH weeks AS (
  SELECT w::DATE AS week FROM generate_series(DATE '2024-01-01', DATE '2024-03-31', INTERVAL 7 DAY) AS g(w)
)
SELECT weeks.week, count(o.order_id) FROM weeks LEFT JOIN orders o ON date_trunc('week', o.ordered_at) = weeks.week
GROUP BY weeks.week
-- ;;
-- title: TABLE statement
TABLE orders
-- ;;
-- title: an alias that looks like a file name is only an alias
SELECT "x.csv".order_id FROM orders AS "x.csv"
-- ;;
-- title: FROM ONLY
SELECT count(*) FROM ONLY payments
