-- Legitimate corpus over the built-in retail bank: read-only DuckDB queries that the guard
-- AND the worker's DuckDB parse check must accept, and that must execute on the real,
-- built retail database (tests/harness/test_guard.py and tests/harness/test_worker.py).
--
-- Format: as tests/data/guard/legit.sql (`-- title:` line, the SQL, a `-- ;;` line).
-- Tables: customers, stores, categories, products, orders, order_items, payments, returns.

-- title: r plain select
SELECT customer_id, customer_name, city FROM customers
-- ;;
-- title: r count with filter
SELECT count(*) FROM orders WHERE status = 'completed'
-- ;;
-- title: r group by city
SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY city
-- ;;
-- title: r group by all
SELECT city, is_member, count(*) FROM customers GROUP BY ALL ORDER BY ALL
-- ;;
-- title: r order by all desc
SELECT store_id, store_name FROM stores ORDER BY ALL DESC
-- ;;
-- title: r limit percent with sign
SELECT * FROM orders ORDER BY order_id LIMIT 10%
-- ;;
-- title: r limit percent keyword
SELECT * FROM orders ORDER BY order_id LIMIT 10 PERCENT
-- ;;
-- title: r limit and offset
SELECT order_id FROM orders ORDER BY order_id LIMIT 3 OFFSET 2
-- ;;
-- title: r FROM-first
FROM orders SELECT order_id, total_amount WHERE total_amount > 100
-- ;;
-- title: r inner join
SELECT o.order_id, c.customer_name FROM orders o JOIN customers c ON c.customer_id = o.customer_id
-- ;;
-- title: r left join with coalesce
SELECT c.customer_id, coalesce(sum(o.total_amount), 0) AS spent
FROM customers c LEFT JOIN orders o ON o.customer_id = c.customer_id
GROUP BY c.customer_id ORDER BY c.customer_id
-- ;;
-- title: r three-way join
SELECT o.order_id, p.product_name, i.quantity
FROM orders o JOIN order_items i USING (order_id) JOIN products p USING (product_id)
-- ;;
-- title: r full outer join
SELECT s.store_id, o.order_id FROM stores s FULL OUTER JOIN orders o ON o.store_id = s.store_id
-- ;;
-- title: r anti join via NOT EXISTS
SELECT c.customer_id FROM customers c
WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id)
-- ;;
-- title: r semi join keyword
SELECT * FROM customers SEMI JOIN orders USING (customer_id)
-- ;;
-- title: r anti join keyword
SELECT * FROM products ANTI JOIN order_items USING (product_id)
-- ;;
-- title: r ASOF join
SELECT o.order_id, p.payment_id
FROM orders o ASOF JOIN payments p ON p.order_id = o.order_id AND p.paid_ts >= o.order_ts
-- ;;
-- title: r ASOF left join
SELECT o.order_id, p.paid_ts
FROM orders o ASOF LEFT JOIN payments p ON o.order_id = p.order_id AND o.order_ts <= p.paid_ts
-- ;;
-- title: r POSITIONAL join
SELECT * FROM (SELECT customer_id FROM customers ORDER BY 1) POSITIONAL JOIN (SELECT store_id FROM stores ORDER BY 1)
-- ;;
-- title: r cross join with range
SELECT s.store_id, r.range AS k FROM stores s CROSS JOIN range(2) r
-- ;;
-- title: r lateral join
SELECT c.customer_id, x.n
FROM customers c, LATERAL (SELECT count(*) AS n FROM orders o WHERE o.customer_id = c.customer_id) x
-- ;;
-- title: r natural join
SELECT * FROM order_items NATURAL JOIN products
-- ;;
-- title: r self join
SELECT a.customer_id, b.customer_id FROM customers a JOIN customers b ON a.city = b.city AND a.customer_id < b.customer_id
-- ;;
-- title: r CTE
WITH done AS (SELECT * FROM orders WHERE status = 'completed')
SELECT store_id, sum(total_amount) FROM done GROUP BY store_id
-- ;;
-- title: r chained CTEs
WITH a AS (SELECT order_id, total_amount FROM orders), b AS (SELECT * FROM a WHERE total_amount > 50)
SELECT count(*) FROM b
-- ;;
-- title: r CTE shadowing a table
WITH orders AS (SELECT * FROM orders WHERE status <> 'cancelled') SELECT count(*) FROM orders
-- ;;
-- title: r materialized CTE
WITH m AS MATERIALIZED (SELECT customer_id FROM orders) SELECT count(DISTINCT customer_id) FROM m
-- ;;
-- title: r recursive CTE
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT sum(i) FROM n
-- ;;
-- title: r CTE inside a subquery
SELECT * FROM (WITH x AS (SELECT 1 AS one) SELECT one FROM x) s
-- ;;
-- title: r row_number
SELECT order_id, row_number() OVER (PARTITION BY customer_id ORDER BY order_ts) AS rn FROM orders
-- ;;
-- title: r rank and dense_rank
SELECT product_id, rank() OVER (ORDER BY list_price DESC), dense_rank() OVER (ORDER BY list_price DESC) FROM products
-- ;;
-- title: r running total
SELECT order_id, sum(total_amount) OVER (ORDER BY order_ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM orders
-- ;;
-- title: r moving average with RANGE frame
SELECT order_id, avg(total_amount) OVER (ORDER BY order_ts RANGE BETWEEN INTERVAL 7 DAY PRECEDING AND CURRENT ROW) FROM orders
-- ;;
-- title: r lag and lead
SELECT order_id, lag(total_amount) OVER w, lead(total_amount, 1, 0) OVER w FROM orders WINDOW w AS (ORDER BY order_id)
-- ;;
-- title: r first_value last_value nth_value
SELECT DISTINCT customer_id,
  first_value(order_id) OVER w, last_value(order_id) OVER w, nth_value(order_id, 2) OVER w
FROM orders WINDOW w AS (PARTITION BY customer_id ORDER BY order_ts ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
-- ;;
-- title: r ntile percent_rank cume_dist
SELECT order_id, ntile(4) OVER (ORDER BY total_amount), percent_rank() OVER (ORDER BY total_amount), cume_dist() OVER (ORDER BY total_amount) FROM orders
-- ;;
-- title: r QUALIFY
SELECT customer_id, order_id FROM orders QUALIFY row_number() OVER (PARTITION BY customer_id ORDER BY total_amount DESC) = 1
-- ;;
-- title: r QUALIFY with a named window
SELECT * FROM orders WINDOW w AS (PARTITION BY store_id ORDER BY order_ts) QUALIFY rank() OVER w <= 2
-- ;;
-- title: r window with FILTER
SELECT order_id, count(*) FILTER (WHERE status = 'completed') OVER (PARTITION BY customer_id) FROM orders
-- ;;
-- title: r window with EXCLUDE
SELECT order_id, sum(total_amount) OVER (ORDER BY order_id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) FROM orders
-- ;;
-- title: r arg_max and arg_min
SELECT customer_id, arg_max(order_id, total_amount), arg_min(order_id, order_ts) FROM orders GROUP BY customer_id
-- ;;
-- title: r max_by min_by
SELECT store_id, max_by(order_id, total_amount), min_by(order_id, total_amount) FROM orders GROUP BY store_id
-- ;;
-- title: r aggregates with FILTER
SELECT count(*) FILTER (WHERE status = 'completed') AS done, count(*) FILTER (WHERE status = 'cancelled') AS cancelled FROM orders
-- ;;
-- title: r count distinct
SELECT count(DISTINCT customer_id) FROM orders
-- ;;
-- title: r statistics aggregates
SELECT avg(total_amount), stddev_pop(total_amount), stddev_samp(total_amount), var_pop(total_amount), median(total_amount) FROM orders
-- ;;
-- title: r quantiles
SELECT quantile_cont(total_amount, 0.9), quantile_disc(total_amount, 0.5), quantile_cont(total_amount, [0.25, 0.75]) FROM orders
-- ;;
-- title: r mode and histogram
SELECT mode(status), histogram(status) FROM orders
-- ;;
-- title: r string_agg ordered
SELECT customer_id, string_agg(CAST(order_id AS VARCHAR), ',' ORDER BY order_id) FROM orders GROUP BY customer_id
-- ;;
-- title: r list aggregate ordered
SELECT customer_id, list(order_id ORDER BY order_ts) FROM orders GROUP BY customer_id
-- ;;
-- title: r bool_and bool_or
SELECT store_id, bool_and(total_amount > 0), bool_or(status = 'pending') FROM orders GROUP BY store_id
-- ;;
-- title: r sum of products with discount
SELECT order_id, sum(quantity * unit_price - discount) AS goods FROM order_items GROUP BY order_id
-- ;;
-- title: r HAVING
SELECT customer_id, count(*) FROM orders GROUP BY customer_id HAVING count(*) > 1
-- ;;
-- title: r GROUPING SETS
SELECT city, is_member, count(*) FROM customers GROUP BY GROUPING SETS ((city), (is_member), ())
-- ;;
-- title: r ROLLUP with grouping()
SELECT store_id, status, sum(total_amount), grouping(store_id, status) FROM orders GROUP BY ROLLUP (store_id, status)
-- ;;
-- title: r CUBE
SELECT store_id, status, count(*) FROM orders GROUP BY CUBE (store_id, status)
-- ;;
-- title: r PIVOT with IN list
PIVOT orders ON status IN ('completed', 'cancelled', 'pending') USING count(*) GROUP BY store_id
-- ;;
-- title: r PIVOT in FROM with IN list
SELECT * FROM (PIVOT orders ON status IN ('completed', 'pending') USING sum(total_amount))
-- ;;
-- title: r SQL-standard PIVOT
SELECT * FROM (SELECT store_id, status, total_amount FROM orders) PIVOT (sum(total_amount) FOR status IN ('completed', 'cancelled'))
-- ;;
-- title: r UNPIVOT
UNPIVOT (SELECT order_id, shipping_fee, total_amount FROM orders) ON shipping_fee, total_amount INTO NAME measure VALUE amount
-- ;;
-- title: r SQL-standard UNPIVOT
SELECT * FROM (SELECT order_id, shipping_fee, total_amount FROM orders) UNPIVOT (amount FOR measure IN (shipping_fee, total_amount))
-- ;;
-- title: r UNION ALL
SELECT customer_id AS id FROM customers UNION ALL SELECT store_id FROM stores
-- ;;
-- title: r UNION BY NAME
SELECT 1 AS a, 'x' AS b UNION BY NAME SELECT 'y' AS b, 2 AS a
-- ;;
-- title: r INTERSECT and EXCEPT
(SELECT customer_id FROM orders INTERSECT SELECT customer_id FROM customers) EXCEPT SELECT 99
-- ;;
-- title: r EXCEPT ALL
SELECT product_id FROM order_items EXCEPT ALL SELECT product_id FROM returns
-- ;;
-- title: r VALUES as a table
SELECT * FROM (VALUES ('completed', 1), ('cancelled', 0)) AS v(status, flag)
-- ;;
-- title: r VALUES joined to a table
SELECT o.order_id, v.flag FROM orders o JOIN (VALUES ('completed', 1)) v(status, flag) USING (status)
-- ;;
-- title: r bare VALUES
VALUES (1, 'a'), (2, 'b')
-- ;;
-- title: r UNNEST in select
SELECT unnest(['a', 'b', 'c']) AS letter
-- ;;
-- title: r UNNEST in FROM
SELECT x FROM unnest([1, 2, 3]) AS t(x)
-- ;;
-- title: r UNNEST of a struct recursive
SELECT unnest({'a': 1, 'b': 2})
-- ;;
-- title: r range as a calendar spine
SELECT d::DATE AS day FROM range(DATE '2025-01-01', DATE '2025-01-08', INTERVAL 1 DAY) AS t(d)
-- ;;
-- title: r generate_series months left-joined to orders
SELECT m.month, count(o.order_id)
FROM generate_series(DATE '2025-01-01', DATE '2025-12-01', INTERVAL 1 MONTH) AS m(month)
LEFT JOIN orders o ON date_trunc('month', o.order_ts) = m.month
GROUP BY m.month ORDER BY m.month
-- ;;
-- title: r generate_series scalar
SELECT generate_series(1, 3), range(3)
-- ;;
-- title: r list literal and functions
SELECT [1, 2, 3] AS l, list_sum([1, 2, 3]), list_reverse([1, 2]), len([1, 2])
-- ;;
-- title: r list_transform and list_filter
SELECT list_transform([1, 2, 3], x -> x * 2), list_filter([1, 2, 3], x -> x > 1)
-- ;;
-- title: r list comprehension
SELECT [x * 2 FOR x IN [1, 2, 3] IF x > 1]
-- ;;
-- title: r list_reduce and list_sort
SELECT list_reduce([1, 2, 3], (a, b) -> a + b), list_sort([3, 1, 2]), list_distinct([1, 1, 2])
-- ;;
-- title: r list_contains and list slicing
SELECT list_contains([1, 2], 2), [1, 2, 3, 4][2:3], [1, 2, 3][-1], list_extract([5, 6], 1)
-- ;;
-- title: r array_agg and list_has_any
SELECT customer_id, list_has_any(array_agg(status), ['pending']) FROM orders GROUP BY customer_id
-- ;;
-- title: r struct literal and access
SELECT {'id': order_id, 'amount': total_amount} AS s, ({'a': 1}).a FROM orders
-- ;;
-- title: r struct_pack and struct_extract
SELECT struct_extract(struct_pack(k := 1, v := 'x'), 'v'), struct_pack(a := 1).a
-- ;;
-- title: r struct star expansion
SELECT s.* FROM (SELECT {'a': 1, 'b': 2} AS s)
-- ;;
-- title: r map functions
SELECT map(['a', 'b'], [1, 2]) AS m, map_keys(map(['a'], [1])), element_at(map(['k'], [5]), 'k')
-- ;;
-- title: r regexp functions
SELECT regexp_matches(customer_name, '^王'), regexp_replace(phone, '[0-9]', '*', 'g'), regexp_extract('ab12', '[0-9]+') FROM customers
-- ;;
-- title: r regexp_extract_all and split
SELECT regexp_extract_all('a1b22c333', '[0-9]+'), regexp_split_to_array('a,b;c', '[,;]'), string_split('a-b', '-')
-- ;;
-- title: r regexp_full_match and similar to
SELECT regexp_full_match('abc', 'a.c'), 'abc' SIMILAR TO 'a.c', 'abc' ~ 'b'
-- ;;
-- title: r LIKE ILIKE GLOB
SELECT * FROM stores WHERE store_name LIKE '%店' OR store_name ILIKE 'A%' OR city GLOB '上*'
-- ;;
-- title: r string functions
SELECT upper('a'), lower('B'), length(customer_name), substr(customer_name, 1, 1), left(city, 1), right(city, 1), reverse('ab') FROM customers
-- ;;
-- title: r trim pad repeat replace
SELECT trim('  x  '), ltrim('xxa', 'x'), rpad('a', 3, '*'), lpad('7', 3, '0'), repeat('ab', 2), replace('aXb', 'X', '-')
-- ;;
-- title: r concat and string operators
SELECT concat(customer_name, '-', city), concat_ws('/', city, phone), customer_name || '!' FROM customers
-- ;;
-- title: r position strpos instr contains
SELECT position('b' IN 'abc'), strpos('abc', 'c'), instr('abc', 'a'), contains('abc', 'bc'), starts_with('abc', 'a'), ends_with('abc', 'c')
-- ;;
-- title: r format and printf
SELECT format('{}-{}', 1, 'a'), printf('%05d', 42), format('{:.2f}', 3.14159)
-- ;;
-- title: r string hashing and encoding
SELECT md5('x'), sha256('x'), hash('x'), to_base64('x'::BLOB), hex(255), bin(5)
-- ;;
-- title: r split_part and string_agg distinct
SELECT split_part('a,b,c', ',', 2), string_agg(DISTINCT city, ', ') FROM customers
-- ;;
-- title: r nullif ifnull and nvl-like
SELECT nullif(phone, ''), ifnull(phone, '-'), coalesce(nullif(phone, ''), 'none') FROM customers
-- ;;
-- title: r CASE searched and simple
SELECT CASE WHEN total_amount >= 200 THEN 'big' WHEN total_amount >= 100 THEN 'mid' ELSE 'small' END,
       CASE status WHEN 'completed' THEN 1 ELSE 0 END FROM orders
-- ;;
-- title: r if and greatest least
SELECT if(total_amount > 100, 'y', 'n'), greatest(shipping_fee, 5), least(shipping_fee, 5) FROM orders
-- ;;
-- title: r casts and try_cast
SELECT CAST(total_amount AS DOUBLE), total_amount::INTEGER, TRY_CAST('x' AS INTEGER), CAST('2025-01-01' AS DATE) FROM orders
-- ;;
-- title: r decimal rounding
SELECT round(total_amount, 1), floor(total_amount), ceil(total_amount), trunc(total_amount), round_even(2.5, 0) FROM orders
-- ;;
-- title: r math functions
SELECT abs(-1), sqrt(16), power(2, 10), ln(1), log10(100), exp(0), sign(-3), pi(), 7 % 3, 7 // 2, 2 ** 3
-- ;;
-- title: r integer division and modulo functions
SELECT divide(7, 2), mod(7, 3), gcd(12, 18), lcm(4, 6), factorial(5)
-- ;;
-- title: r bit functions
SELECT 5 & 3, 5 | 3, xor(5, 3), 1 << 3, bit_count(7)
-- ;;
-- title: r date_trunc and date_part
SELECT date_trunc('month', order_ts), date_part('year', order_ts), extract(dow FROM order_ts) FROM orders
-- ;;
-- title: r date_diff and date_add
SELECT date_diff('day', DATE '2025-01-01', order_ts::DATE), date_add(order_ts, INTERVAL 1 DAY), datediff('month', DATE '2025-01-01', DATE '2025-03-01') FROM orders
-- ;;
-- title: r date arithmetic with intervals
SELECT order_ts + INTERVAL 30 DAY, order_ts - INTERVAL '1 hour', DATE '2025-03-01' - DATE '2025-02-01' FROM orders
-- ;;
-- title: r strftime and strptime
SELECT strftime(order_ts, '%Y-%m'), strptime('2025-01-02', '%Y-%m-%d'), try_strptime('x', '%Y') FROM orders
-- ;;
-- title: r year month day week
SELECT year(order_ts), month(order_ts), day(order_ts), week(order_ts), quarter(order_ts), dayofweek(order_ts), dayname(order_ts), monthname(order_ts) FROM orders
-- ;;
-- title: r last_day and make_date
SELECT last_day(DATE '2025-02-10'), make_date(2025, 3, 1), make_timestamp(2025, 1, 2, 3, 4, 5.0)
-- ;;
-- title: r time_bucket
SELECT time_bucket(INTERVAL 1 WEEK, order_ts), count(*) FROM orders GROUP BY 1 ORDER BY 1
-- ;;
-- title: r epoch conversions
SELECT epoch(order_ts), epoch_ms(0), to_timestamp(0), make_timestamp(0) FROM orders
-- ;;
-- title: r AT TIME ZONE on a fixed instant
SELECT TIMESTAMPTZ '2025-01-01 00:00:00+00' AT TIME ZONE 'Asia/Shanghai'
-- ;;
-- title: r interval functions
SELECT to_days(3), to_hours(2), INTERVAL 90 MINUTE, date_part('hour', INTERVAL 2 HOUR)
-- ;;
-- title: r age between two fixed dates
SELECT age(TIMESTAMP '2025-03-01', TIMESTAMP '2025-01-01')
-- ;;
-- title: r BETWEEN IN and IS DISTINCT FROM
SELECT * FROM orders WHERE total_amount BETWEEN 10 AND 500 AND status IN ('completed', 'pending') AND store_id IS DISTINCT FROM 99
-- ;;
-- title: r IN subquery and scalar subquery
SELECT * FROM orders WHERE customer_id IN (SELECT customer_id FROM customers WHERE city = '上海')
AND total_amount > (SELECT avg(total_amount) FROM orders)
-- ;;
-- title: r ANY and ALL
SELECT * FROM products WHERE list_price > ALL (SELECT unit_price FROM order_items WHERE quantity > 100) OR list_price = ANY (SELECT 1)
-- ;;
-- title: r correlated subquery in select
SELECT c.customer_id, (SELECT max(o.order_ts) FROM orders o WHERE o.customer_id = c.customer_id) AS last_order FROM customers c
-- ;;
-- title: r EXISTS
SELECT * FROM stores s WHERE EXISTS (SELECT 1 FROM orders o WHERE o.store_id = s.store_id)
-- ;;
-- title: r DISTINCT ON
SELECT DISTINCT ON (customer_id) customer_id, order_id FROM orders ORDER BY customer_id, order_ts DESC
-- ;;
-- title: r SELECT DISTINCT
SELECT DISTINCT city FROM customers
-- ;;
-- title: r star EXCLUDE and REPLACE
SELECT * EXCLUDE (phone) REPLACE (upper(city) AS city) FROM customers
-- ;;
-- title: r COLUMNS expression
SELECT max(COLUMNS('.*_amount')) FROM orders
-- ;;
-- title: r COLUMNS with a lambda
SELECT min(COLUMNS(c -> c LIKE '%_id')) FROM orders
-- ;;
-- title: r positional column reference
SELECT #1, #2 FROM (SELECT order_id, total_amount FROM orders)
-- ;;
-- title: r ORDER BY NULLS LAST and expressions
SELECT customer_id, phone FROM customers ORDER BY phone NULLS LAST, length(customer_name) DESC
-- ;;
-- title: r boolean logic and IS NULL
SELECT * FROM customers WHERE (is_member IS NULL OR NOT is_member) AND phone IS NOT NULL
-- ;;
-- title: r typeof and hash of a row
SELECT typeof(total_amount), typeof(order_ts) FROM orders LIMIT 1
-- ;;
-- title: r JSON functions on literals
SELECT json_extract('{"a": 1}', '$.a'), json_extract_string('{"b": "x"}', '$.b'), '{"a": 2}'::JSON ->> '$.a', json_object('k', 1)
-- ;;
-- title: r to_json and json_array
SELECT to_json({'id': order_id}), json_array(1, 2) FROM orders LIMIT 2
-- ;;
-- title: r string_to_array and array_to_string
SELECT string_to_array('a b', ' '), array_to_string(['a', 'b'], '+')
-- ;;
-- title: r levenshtein and jaccard
SELECT levenshtein('kitten', 'sitting'), jaccard('abc', 'abd'), jaro_winkler_similarity('abc', 'abd')
-- ;;
-- title: r strip_accents and nfc_normalize
SELECT strip_accents('café'), nfc_normalize('e'), unicode('a'), chr(65), ascii('A')
-- ;;
-- title: r bar chart helper
SELECT store_id, bar(count(*), 0, 10, 20) FROM orders GROUP BY store_id
-- ;;
-- title: r equi_width_bins
SELECT equi_width_bins(0, 100, 4, false)
-- ;;
-- title: r nested window over aggregate
SELECT store_id, sum(total_amount) AS s, sum(sum(total_amount)) OVER () AS grand, s / grand AS share FROM orders GROUP BY store_id
-- ;;
-- title: r cumulative share per month
WITH m AS (SELECT date_trunc('month', order_ts) AS month, sum(total_amount) AS amt FROM orders GROUP BY 1)
SELECT month, amt, sum(amt) OVER (ORDER BY month) / sum(amt) OVER () AS cum_share FROM m ORDER BY month
-- ;;
-- title: r refunds per product with returns
SELECT p.product_name, coalesce(sum(r.refund_amount), 0) AS refunded
FROM products p LEFT JOIN returns r ON r.product_id = p.product_id GROUP BY p.product_name
-- ;;
-- title: r dedupe returns by return_no
SELECT return_no, any_value(refund_amount) FROM returns GROUP BY return_no
-- ;;
-- title: r payments per method with share
SELECT method, sum(amount), round(100 * sum(amount) / sum(sum(amount)) OVER (), 2) FROM payments GROUP BY method
-- ;;
-- title: r unpaid orders
SELECT o.order_id FROM orders o LEFT JOIN payments p USING (order_id) WHERE p.payment_id IS NULL
-- ;;
-- title: r over-paid orders
SELECT o.order_id, o.total_amount, sum(p.amount) AS paid FROM orders o JOIN payments p USING (order_id)
GROUP BY o.order_id, o.total_amount HAVING sum(p.amount) > o.total_amount
-- ;;
-- title: r category names with uncategorised
SELECT coalesce(c.category_name, '(none)') AS category, count(*) FROM products p LEFT JOIN categories c USING (category_id) GROUP BY 1
-- ;;
-- title: r parenthesised query
(SELECT order_id FROM orders ORDER BY order_id LIMIT 1)
-- ;;
-- title: r trailing semicolon and comments
-- a comment before
SELECT count(*) /* inline */ FROM orders; -- after
-- ;;
-- title: r quoted identifiers and aliases with spaces
SELECT "order_id" AS "Order Id", total_amount AS "金额" FROM "Orders"
-- ;;
-- title: r main-qualified tables
SELECT count(*) FROM main.orders JOIN main.customers USING (customer_id)
-- ;;
-- title: r string literal with embedded quotes and newline inside it
SELECT 'it''s
two lines' AS s, E'tab\there' AS e
-- ;;
-- title: r dollar-quoted string
SELECT $$a 'quoted' text$$ AS s
-- ;;
-- title: r bit string and blob literals
SELECT '101'::BITSTRING AS b, 'AA'::BLOB AS h, unhex('4142') AS u
-- ;;
-- title: r list of structs unnested recursively
SELECT unnest([{'a': 1}, {'a': 2}], recursive := true)
-- ;;
-- title: r filter clause on list aggregation
SELECT list(order_id) FILTER (WHERE total_amount > 100) FROM orders
-- ;;
-- title: r window frame with GROUPS
SELECT order_id, count(*) OVER (ORDER BY store_id GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM orders
-- ;;
-- title: r fill and ignore nulls
SELECT customer_id, last_value(phone IGNORE NULLS) OVER (ORDER BY customer_id) FROM customers
-- ;;
-- title: r try expression
SELECT try(CAST('x' AS INTEGER)), try_cast('1' AS INTEGER)
-- ;;
-- title: r method-call syntax on a column
SELECT city.upper(), customer_name.length() FROM customers
-- ;;
-- title: r lambda with index
SELECT list_transform(['a', 'b'], (x, i) -> x || i::VARCHAR)
-- ;;
-- title: r weighted average macro
SELECT weighted_avg(unit_price, quantity), geomean(quantity) FROM order_items
-- ;;
-- title: r kurtosis skewness entropy
SELECT kurtosis(total_amount), skewness(total_amount), entropy(status) FROM orders
-- ;;
-- title: r regression aggregates
SELECT regr_slope(total_amount, shipping_fee), corr(total_amount, shipping_fee), covar_pop(total_amount, shipping_fee) FROM orders
-- ;;
-- title: r count_if and sum with cast booleans
SELECT count_if(is_member), sum(is_member::INTEGER) FROM customers
-- ;;
-- title: r date comparisons against literals
SELECT * FROM orders WHERE order_ts >= TIMESTAMP '2025-06-01' AND order_ts < DATE '2026-01-01'
-- ;;
-- title: r dayofyear isodow yearweek
SELECT dayofyear(order_ts), isodow(order_ts), yearweek(order_ts), isoyear(order_ts) FROM orders
-- ;;
-- title: r epoch_us and microsecond
SELECT epoch_us(order_ts), microsecond(order_ts), millisecond(order_ts), second(order_ts), minute(order_ts), hour(order_ts) FROM orders
-- ;;
-- title: r list_value and array_length
SELECT list_value(order_id, store_id), array_length([1, 2]), flatten([[1], [2, 3]]) FROM orders
-- ;;
-- title: r struct_insert and struct_keys
SELECT struct_insert({'a': 1}, b := 2), struct_keys({'a': 1, 'b': 2})
-- ;;
-- title: r list_position and list_zip
SELECT list_position([1, 2, 3], 2), list_zip([1, 2], ['a', 'b']), list_concat([1], [2])
-- ;;
-- title: r array functions
SELECT array_distinct([1, 1]), array_sort([2, 1]), array_slice([1, 2, 3], 2, 3), array_has([1], 1)
