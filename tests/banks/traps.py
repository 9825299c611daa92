"""Plausible wrong SQL for every case of the built-in banks: each trap the data must expose.

``TRAPS`` (sales-fixture) and ``RETAIL_TRAPS`` (retail v4) map a case id to a list of
``(trap name, wrong SQL)``. Every wrong query keeps the reference's column shape, so the
only thing that can tell it apart from gold is its rows. The bank tests prove each one
returns a different multiset of rows than the reference; scorer and calibration tests
can run the same queries through the whole path (guard, worker, comparison).
"""

from __future__ import annotations

# ---------------------------------------------------------------- sales-fixture v1

# Half-open September 2026 in Asia/Shanghai, and the same month cut in UTC (the trap).
_SEPT = (
    "deal_time >= TIMESTAMPTZ '2026-09-01 00:00:00+08:00' "
    "AND deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+08:00'"
)
_SEPT_S = _SEPT.replace("deal_time", "s.deal_time")
_SEPT_UTC = (
    "deal_time >= TIMESTAMPTZ '2026-09-01 00:00:00+00:00' "
    "AND deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+00:00'"
)
_SEPT_CLOSED = (
    "deal_time >= TIMESTAMPTZ '2026-09-01 00:00:00+08:00' "
    "AND deal_time <= TIMESTAMPTZ '2026-10-01 00:00:00+08:00'"
)
_SEPT_CREATED = _SEPT.replace("deal_time", "created_at")
# Casting an instant to DATE happens in the session zone (UTC): the same UTC-boundary error.
_SEPT_DATE_CAST = "CAST(deal_time AS DATE) BETWEEN DATE '2026-09-01' AND DATE '2026-09-30'"

TRAPS: dict[str, list[tuple[str, str]]] = {
    "sf-01": [
        (
            "plain_tag_join",  # one-to-many join repeats S01 twice and S02 three times
            "SELECT COUNT(*) AS order_count, SUM(s.amount) AS amount FROM sales AS s "
            f"JOIN sale_tags AS t ON t.sale_id = s.sale_id "
            f"WHERE s.region = '区域甲' AND s.valid = 'Y' AND {_SEPT_S}",
        ),
        (
            "count_distinct_through_tags",  # fixes the count, not the sum
            "SELECT COUNT(DISTINCT s.sale_id) AS order_count, SUM(s.amount) AS amount "
            "FROM sales AS s JOIN sale_tags AS t ON t.sale_id = s.sale_id "
            f"WHERE s.region = '区域甲' AND s.valid = 'Y' AND {_SEPT_S}",
        ),
        (
            "missing_region",  # widened scope: the region 乙 sentinel comes in
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE valid = 'Y' AND {_SEPT}",
        ),
        (
            "kept_right_endpoint",  # S05 at exactly 2026-10-01 00:00 +08 is kept
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE region = '区域甲' AND valid = 'Y' AND {_SEPT_CLOSED}",
        ),
        (
            "kept_invalid",  # S06 (valid = 'N') is kept
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE region = '区域甲' AND {_SEPT}",
        ),
        (
            "utc_boundary",  # month cut in UTC: loses S01, gains S05
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE region = '区域甲' AND valid = 'Y' AND {_SEPT_UTC}",
        ),
        (
            "date_cast_in_session_zone",  # CAST to DATE in UTC: the same boundary error
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE region = '区域甲' AND valid = 'Y' AND {_SEPT_DATE_CAST}",
        ),
        (
            "creation_time",  # created_at instead of deal_time: S02 out, S05 in
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE region = '区域甲' AND valid = 'Y' AND {_SEPT_CREATED}",
        ),
        (
            "store_name_join",  # region read from the store master joined by name
            "SELECT COUNT(*) AS order_count, SUM(s.amount) AS amount FROM sales AS s "
            "JOIN stores AS st ON st.store_name = s.store_name "
            f"WHERE st.region = '区域甲' AND s.valid = 'Y' AND {_SEPT_S}",
        ),
    ],
    "sf-02": [
        (
            "plain_tag_join",  # store A repeated through its tags
            "WITH v AS (SELECT s.store_id, s.amount FROM sales AS s "
            "JOIN sale_tags AS t ON t.sale_id = s.sale_id "
            f"WHERE s.region = '区域甲' AND s.valid = 'Y' AND {_SEPT_S}) "
            "SELECT st.store_name, SUM(v.amount) AS amount FROM v "
            "JOIN stores AS st ON st.store_id = v.store_id GROUP BY st.store_id, st.store_name "
            "UNION ALL SELECT '合计', SUM(amount) FROM v",
        ),
        (
            "missing_region",  # store C of region 乙 and the sentinel in the total
            f"WITH v AS (SELECT store_id, amount FROM sales WHERE valid = 'Y' AND {_SEPT}) "
            "SELECT st.store_name, SUM(v.amount) AS amount FROM v "
            "JOIN stores AS st ON st.store_id = v.store_id GROUP BY st.store_id, st.store_name "
            "UNION ALL SELECT '合计', SUM(amount) FROM v",
        ),
        (
            "no_total_row",  # the question asks for the total too
            "SELECT st.store_name, SUM(s.amount) AS amount FROM sales AS s "
            "JOIN stores AS st ON st.store_id = s.store_id "
            f"WHERE s.region = '区域甲' AND s.valid = 'Y' AND {_SEPT_S} "
            "GROUP BY st.store_id, st.store_name",
        ),
        (
            "kept_invalid",  # S06 inflates store A and the total
            f"WITH v AS (SELECT store_id, amount FROM sales WHERE region = '区域甲' AND {_SEPT}) "
            "SELECT st.store_name, SUM(v.amount) AS amount FROM v "
            "JOIN stores AS st ON st.store_id = v.store_id GROUP BY st.store_id, st.store_name "
            "UNION ALL SELECT '合计', SUM(amount) FROM v",
        ),
        (
            "utc_boundary",
            "WITH v AS (SELECT store_id, amount FROM sales "
            f"WHERE region = '区域甲' AND valid = 'Y' AND {_SEPT_UTC}) "
            "SELECT st.store_name, SUM(v.amount) AS amount FROM v "
            "JOIN stores AS st ON st.store_id = v.store_id GROUP BY st.store_id, st.store_name "
            "UNION ALL SELECT '合计', SUM(amount) FROM v",
        ),
    ],
    "sf-03": [
        (
            "kept_right_endpoint",  # S05 is 人员甲's
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE salesperson = '人员甲' AND valid = 'Y' AND {_SEPT_CLOSED}",
        ),
        (
            "kept_invalid",  # S06 is 人员甲's
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE salesperson = '人员甲' AND {_SEPT}",
        ),
        (
            "utc_boundary",  # S01 falls into August in UTC, S05 into September
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE salesperson = '人员甲' AND valid = 'Y' AND {_SEPT_UTC}",
        ),
        (
            "creation_time",  # S05 was created on 30 September
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE salesperson = '人员甲' AND valid = 'Y' AND {_SEPT_CREATED}",
        ),
    ],
    "sf-04": [
        (
            "store_name_join",  # S04's 门店C matches two stores of that name
            "SELECT COUNT(*) AS order_count, SUM(s.amount) AS amount FROM sales AS s "
            "JOIN stores AS st ON st.store_name = s.store_name "
            f"WHERE s.valid = 'Y' AND {_SEPT_S}",
        ),
        (
            "kept_invalid",
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales WHERE {_SEPT}",
        ),
        (
            "kept_right_endpoint",
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE valid = 'Y' AND {_SEPT_CLOSED}",
        ),
        (
            "utc_boundary",
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE valid = 'Y' AND {_SEPT_UTC}",
        ),
        (
            "creation_time",
            f"SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales "
            f"WHERE valid = 'Y' AND {_SEPT_CREATED}",
        ),
    ],
    "sf-05": [
        (
            "plain_tag_join",  # the acceptance method's 6 rows / 1,100
            "SELECT COUNT(*) AS order_count, SUM(s.amount) AS amount FROM sales AS s "
            "JOIN sale_tags AS t ON t.sale_id = s.sale_id "
            f"WHERE s.region = '区域甲' AND s.valid = 'Y' AND {_SEPT_S}",
        ),
        (
            "count_distinct_through_tags",  # count right, sum still repeated
            "SELECT COUNT(DISTINCT s.sale_id) AS order_count, SUM(s.amount) AS amount "
            "FROM sales AS s JOIN sale_tags AS t ON t.sale_id = s.sale_id "
            f"WHERE s.region = '区域甲' AND s.valid = 'Y' AND {_SEPT_S}",
        ),
        (
            "utc_boundary",  # loses tagged S01; S05 has no tag
            "SELECT COUNT(*) AS order_count, SUM(s.amount) AS amount FROM sales AS s "
            "WHERE s.region = '区域甲' AND s.valid = 'Y' AND "
            + _SEPT_UTC.replace("deal_time", "s.deal_time")
            + " AND EXISTS (SELECT 1 FROM sale_tags AS t WHERE t.sale_id = s.sale_id)",
        ),
    ],
    "sf-06": [
        (
            "store_name_join",  # S04 credited to the closed 门店C of region 甲 as well
            "SELECT st.region, COUNT(*) AS order_count, SUM(s.amount) AS amount "
            "FROM sales AS s JOIN stores AS st ON st.store_name = s.store_name "
            f"WHERE s.valid = 'Y' AND {_SEPT_S} GROUP BY st.region",
        ),
        (
            "kept_invalid",
            "SELECT st.region, COUNT(*) AS order_count, SUM(s.amount) AS amount "
            "FROM sales AS s JOIN stores AS st ON st.store_id = s.store_id "
            f"WHERE {_SEPT_S} GROUP BY st.region",
        ),
        (
            "utc_boundary",
            "SELECT st.region, COUNT(*) AS order_count, SUM(s.amount) AS amount "
            "FROM sales AS s JOIN stores AS st ON st.store_id = s.store_id "
            "WHERE s.valid = 'Y' AND "
            + _SEPT_UTC.replace("deal_time", "s.deal_time")
            + " GROUP BY st.region",
        ),
    ],
    "sf-07": [
        (
            "group_by_store_name",  # the two stores named 门店C merge into one row
            "SELECT MIN(st.store_id) AS store_id, st.store_name, MIN(st.region) AS region, "
            "COALESCE(SUM(s.amount), 0) AS amount FROM stores AS st "
            "LEFT JOIN sales AS s ON s.store_id = st.store_id AND s.valid = 'Y' "
            f"AND {_SEPT_S} GROUP BY st.store_name",
        ),
        (
            "store_name_join",  # the closed 门店C is credited with S04
            "SELECT st.store_id, st.store_name, st.region, COALESCE(SUM(s.amount), 0) AS amount "
            "FROM stores AS st LEFT JOIN sales AS s ON s.store_name = st.store_name "
            f"AND s.valid = 'Y' AND {_SEPT_S} GROUP BY st.store_id, st.store_name, st.region",
        ),
        (
            "filter_in_where_drops_empty_store",  # WHERE on the outer side: inner join again
            "SELECT st.store_id, st.store_name, st.region, COALESCE(SUM(s.amount), 0) AS amount "
            "FROM stores AS st LEFT JOIN sales AS s ON s.store_id = st.store_id "
            f"WHERE s.valid = 'Y' AND {_SEPT_S} GROUP BY st.store_id, st.store_name, st.region",
        ),
        (
            "utc_boundary",
            "SELECT st.store_id, st.store_name, st.region, COALESCE(SUM(s.amount), 0) AS amount "
            "FROM stores AS st LEFT JOIN sales AS s ON s.store_id = st.store_id "
            "AND s.valid = 'Y' AND "
            + _SEPT_UTC.replace("deal_time", "s.deal_time")
            + " GROUP BY st.store_id, st.store_name, st.region",
        ),
    ],
}

# ---------------------------------------------------------------- retail v4

_DEC = "order_ts >= TIMESTAMP '2025-12-01 00:00:00' AND order_ts < TIMESTAMP '2026-01-01 00:00:00'"
_JAN = "order_ts >= TIMESTAMP '2026-01-01 00:00:00' AND order_ts < TIMESTAMP '2026-02-01 00:00:00'"
_LINE = "oi.quantity * oi.unit_price - oi.discount"

RETAIL_TRAPS: dict[str, list[tuple[str, str]]] = {
    "basic-01": [
        (
            "empty_string_not_null",  # '' also means no phone number
            "SELECT customer_id, customer_name FROM customers WHERE phone IS NULL",
        ),
    ],
    "basic-02": [
        (
            "inclusive_cross_year_endpoint",  # BETWEEN keeps the order at 2026-01-01 00:00
            "SELECT COUNT(*) AS order_count FROM orders "
            "WHERE order_ts BETWEEN TIMESTAMP '2025-12-01' AND TIMESTAMP '2026-01-01'",
        ),
        (
            "day_truncated_endpoint",  # <= '2025-12-31' means midnight: loses 23:30 on 31 Dec
            "SELECT COUNT(*) AS order_count FROM orders "
            "WHERE order_ts >= TIMESTAMP '2025-12-01' AND order_ts <= TIMESTAMP '2025-12-31'",
        ),
    ],
    "basic-03": [
        (
            "exclusive_price_endpoints",  # 50 and 100 are both in the data
            "SELECT product_id, product_name, list_price FROM products "
            "WHERE is_active AND list_price > 50 AND list_price < 100 "
            "ORDER BY list_price DESC, product_id",
        ),
        (
            "unknown_flag_as_on_sale",  # NULL is unknown, not on sale
            "SELECT product_id, product_name, list_price FROM products "
            "WHERE is_active IS NOT FALSE AND list_price BETWEEN 50 AND 100 "
            "ORDER BY list_price DESC, product_id",
        ),
    ],
    "joins-01": [
        (
            "inner_join_drops_unsold_categories",
            "SELECT c.category_name, SUM(oi.quantity * oi.unit_price - oi.discount) AS revenue "
            "FROM categories AS c JOIN products AS p ON p.category_id = c.category_id "
            "JOIN order_items AS oi ON oi.product_id = p.product_id "
            "JOIN orders AS o ON o.order_id = oi.order_id WHERE o.status = 'completed' "
            "GROUP BY c.category_id, c.category_name",
        ),
        (
            "status_filter_in_where_after_outer_join",  # turns the outer joins into inner ones
            f"SELECT c.category_name, COALESCE(SUM({_LINE}), 0) AS revenue "
            "FROM categories AS c LEFT JOIN products AS p ON p.category_id = c.category_id "
            "LEFT JOIN order_items AS oi ON oi.product_id = p.product_id "
            "LEFT JOIN orders AS o ON o.order_id = oi.order_id WHERE o.status = 'completed' "
            "GROUP BY c.category_id, c.category_name",
        ),
        (
            "no_status_filter",  # the cancelled-only category gets revenue
            f"SELECT c.category_name, COALESCE(SUM({_LINE}), 0) AS revenue "
            "FROM categories AS c LEFT JOIN products AS p ON p.category_id = c.category_id "
            "LEFT JOIN order_items AS oi ON oi.product_id = p.product_id "
            "GROUP BY c.category_id, c.category_name",
        ),
        (
            "line_discount_ignored",
            "WITH sold AS (SELECT oi.product_id, oi.quantity * oi.unit_price AS line_amount "
            "FROM order_items AS oi JOIN orders AS o ON o.order_id = oi.order_id "
            "WHERE o.status = 'completed') "
            "SELECT c.category_name, COALESCE(SUM(s.line_amount), 0) AS revenue "
            "FROM categories AS c LEFT JOIN products AS p ON p.category_id = c.category_id "
            "LEFT JOIN sold AS s ON s.product_id = p.product_id "
            "GROUP BY c.category_id, c.category_name",
        ),
    ],
    "joins-02": [
        (
            "count_rows_after_item_join",  # counts lines, not orders (grain)
            "SELECT s.store_name, COUNT(*) AS order_count, SUM(oi.quantity) AS item_quantity "
            "FROM orders AS o JOIN stores AS s ON s.store_id = o.store_id "
            "JOIN order_items AS oi ON oi.order_id = o.order_id "
            f"WHERE o.status = 'completed' AND o.{_JAN} GROUP BY s.store_id, s.store_name",
        ),
        (
            "inner_join_loses_order_without_lines",  # distinct count, but the order is gone
            "SELECT s.store_name, COUNT(DISTINCT o.order_id) AS order_count, "
            "SUM(oi.quantity) AS item_quantity "
            "FROM orders AS o JOIN stores AS s ON s.store_id = o.store_id "
            "JOIN order_items AS oi ON oi.order_id = o.order_id "
            f"WHERE o.status = 'completed' AND o.{_JAN} GROUP BY s.store_id, s.store_name",
        ),
        (
            "lines_filtered_through_products",  # the line of an unknown product was still sold
            "SELECT s.store_name, COUNT(DISTINCT o.order_id) AS order_count, "
            "COALESCE(SUM(oi.quantity), 0) AS item_quantity "
            "FROM orders AS o JOIN stores AS s ON s.store_id = o.store_id "
            "LEFT JOIN (order_items AS oi JOIN products AS p ON p.product_id = oi.product_id) "
            "ON oi.order_id = o.order_id "
            f"WHERE o.status = 'completed' AND o.{_JAN} GROUP BY s.store_id, s.store_name",
        ),
    ],
    "joins-03": [
        (
            "inner_join_drops_missing_customer",
            "SELECT o.order_id, c.customer_name, s.store_name FROM orders AS o "
            "JOIN customers AS c ON c.customer_id = o.customer_id "
            "JOIN stores AS s ON s.store_id = o.store_id "
            "WHERE o.order_ts >= TIMESTAMP '2026-02-01' AND o.order_ts < TIMESTAMP '2026-03-01'",
        ),
        (
            "inclusive_month_end",  # keeps the order at 2026-03-01 00:00
            "SELECT o.order_id, c.customer_name, s.store_name FROM orders AS o "
            "LEFT JOIN customers AS c ON c.customer_id = o.customer_id "
            "JOIN stores AS s ON s.store_id = o.store_id "
            "WHERE o.order_ts BETWEEN TIMESTAMP '2026-02-01' AND TIMESTAMP '2026-03-01'",
        ),
    ],
    "agg-01": [
        (
            "overlapping_between_bands",  # 100 and 300 fall into the lower band
            "SELECT CASE WHEN total_amount BETWEEN 0 AND 100 THEN '小额' "
            "WHEN total_amount BETWEEN 100 AND 300 THEN '中额' ELSE '大额' END AS amount_band, "
            "COUNT(*) AS order_count, SUM(total_amount) AS total_amount FROM orders "
            "WHERE status = 'completed' GROUP BY amount_band",
        ),
        (
            "gap_between_strict_bands",  # 100 and 300 fall into no band
            "SELECT CASE WHEN total_amount < 100 THEN '小额' "
            "WHEN total_amount > 100 AND total_amount < 300 THEN '中额' "
            "WHEN total_amount > 300 THEN '大额' END AS amount_band, "
            "COUNT(*) AS order_count, SUM(total_amount) AS total_amount FROM orders "
            "WHERE status = 'completed' GROUP BY amount_band",
        ),
        (
            "all_statuses",
            "SELECT CASE WHEN total_amount < 100 THEN '小额' WHEN total_amount < 300 THEN '中额' "
            "ELSE '大额' END AS amount_band, COUNT(*) AS order_count, "
            "SUM(total_amount) AS total_amount FROM orders GROUP BY amount_band",
        ),
    ],
    "agg-02": [
        (
            "mean_of_product_means",  # pre-aggregated per product, then averaged
            "WITH per_product AS (SELECT p.category_id, p.product_id, "
            "AVG(oi.unit_price) AS avg_price FROM order_items AS oi "
            "JOIN orders AS o ON o.order_id = oi.order_id "
            "JOIN products AS p ON p.product_id = oi.product_id WHERE o.status = 'completed' "
            "GROUP BY p.category_id, p.product_id) "
            "SELECT c.category_name, AVG(pp.avg_price) AS avg_unit_price FROM per_product AS pp "
            "JOIN categories AS c ON c.category_id = pp.category_id "
            "GROUP BY c.category_id, c.category_name HAVING AVG(pp.avg_price) > 35",
        ),
        (
            "quantity_weighted_mean",  # not the metric's definition
            f"SELECT c.category_name, SUM({_LINE}) / SUM(oi.quantity) AS avg_unit_price "
            "FROM order_items AS oi JOIN orders AS o ON o.order_id = oi.order_id "
            "JOIN products AS p ON p.product_id = oi.product_id "
            "JOIN categories AS c ON c.category_id = p.category_id WHERE o.status = 'completed' "
            f"GROUP BY c.category_id, c.category_name HAVING SUM({_LINE}) / SUM(oi.quantity) > 35",
        ),
        (
            "no_status_filter",  # the cancelled-only category qualifies
            "SELECT c.category_name, AVG(oi.unit_price) AS avg_unit_price "
            "FROM order_items AS oi JOIN products AS p ON p.product_id = oi.product_id "
            "JOIN categories AS c ON c.category_id = p.category_id "
            "GROUP BY c.category_id, c.category_name HAVING AVG(oi.unit_price) > 35",
        ),
    ],
    "agg-03": [
        (
            "duplicate_returns_counted",  # R003 was recorded twice
            "SELECT c.category_name, SUM(r.quantity) AS return_quantity, "
            "SUM(r.refund_amount) AS refund_amount FROM returns AS r "
            "JOIN products AS p ON p.product_id = r.product_id "
            "JOIN categories AS c ON c.category_id = p.category_id "
            "GROUP BY c.category_id, c.category_name",
        ),
        (
            "sum_distinct_amounts",  # two different returns share an amount
            "SELECT c.category_name, SUM(DISTINCT r.quantity) AS return_quantity, "
            "SUM(DISTINCT r.refund_amount) AS refund_amount FROM returns AS r "
            "JOIN products AS p ON p.product_id = r.product_id "
            "JOIN categories AS c ON c.category_id = p.category_id "
            "GROUP BY c.category_id, c.category_name",
        ),
    ],
    "time-01": [
        (
            "no_calendar_spine",  # empty and zero-revenue months vanish; LAG skips them
            "WITH rev AS (SELECT s.store_id, s.store_name, "
            "CAST(date_trunc('month', o.order_ts) AS DATE) AS month, "
            "SUM(o.total_amount) AS revenue FROM orders AS o "
            "JOIN stores AS s ON s.store_id = o.store_id WHERE o.status = 'completed' "
            "AND o.order_ts >= TIMESTAMP '2025-11-01' AND o.order_ts < TIMESTAMP '2026-03-01' "
            "GROUP BY s.store_id, s.store_name, month) "
            "SELECT store_name, month, revenue, "
            "revenue - LAG(revenue) OVER (PARTITION BY store_id ORDER BY month) "
            "AS change_from_prev FROM rev",
        ),
        (
            "null_instead_of_zero",  # spine without COALESCE: NULL is not 0
            "WITH months AS (SELECT CAST(m AS DATE) AS month FROM generate_series("
            "TIMESTAMP '2025-11-01', TIMESTAMP '2026-02-01', INTERVAL 1 MONTH) AS t(m)), "
            "rev AS (SELECT store_id, CAST(date_trunc('month', order_ts) AS DATE) AS month, "
            "SUM(total_amount) AS revenue FROM orders WHERE status = 'completed' "
            "GROUP BY store_id, month) "
            "SELECT s.store_name, m.month, r.revenue, "
            "r.revenue - LAG(r.revenue) OVER (PARTITION BY s.store_id ORDER BY m.month) "
            "AS change_from_prev FROM stores AS s CROSS JOIN months AS m "
            "LEFT JOIN rev AS r ON r.store_id = s.store_id AND r.month = m.month",
        ),
        (
            "lag_ordered_by_month_number",  # January sorts before November: broken across years
            "WITH months AS (SELECT CAST(m AS DATE) AS month FROM generate_series("
            "TIMESTAMP '2025-11-01', TIMESTAMP '2026-02-01', INTERVAL 1 MONTH) AS t(m)), "
            "rev AS (SELECT store_id, CAST(date_trunc('month', order_ts) AS DATE) AS month, "
            "SUM(total_amount) AS revenue FROM orders WHERE status = 'completed' "
            "GROUP BY store_id, month), "
            "grid AS (SELECT s.store_id, s.store_name, m.month, "
            "COALESCE(r.revenue, 0) AS revenue FROM stores AS s CROSS JOIN months AS m "
            "LEFT JOIN rev AS r ON r.store_id = s.store_id AND r.month = m.month) "
            "SELECT store_name, month, revenue, revenue - LAG(revenue) OVER "
            "(PARTITION BY store_id ORDER BY month(month)) AS change_from_prev FROM grid",
        ),
        (
            "all_statuses",  # cancelled and pending orders are not revenue
            "WITH months AS (SELECT CAST(m AS DATE) AS month FROM generate_series("
            "TIMESTAMP '2025-11-01', TIMESTAMP '2026-02-01', INTERVAL 1 MONTH) AS t(m)), "
            "rev AS (SELECT store_id, CAST(date_trunc('month', order_ts) AS DATE) AS month, "
            "SUM(total_amount) AS revenue FROM orders GROUP BY store_id, month), "
            "grid AS (SELECT s.store_id, s.store_name, m.month, "
            "COALESCE(r.revenue, 0) AS revenue FROM stores AS s CROSS JOIN months AS m "
            "LEFT JOIN rev AS r ON r.store_id = s.store_id AND r.month = m.month) "
            "SELECT store_name, month, revenue, revenue - LAG(revenue) OVER "
            "(PARTITION BY store_id ORDER BY month) AS change_from_prev FROM grid",
        ),
    ],
    "time-02": [
        (
            "row_number_drops_tie",  # one of the products tied at third place disappears
            "WITH sales AS (SELECT p.category_id, p.product_id, "
            f"SUM({_LINE}) AS revenue FROM order_items AS oi "
            "JOIN orders AS o ON o.order_id = oi.order_id "
            "JOIN products AS p ON p.product_id = oi.product_id WHERE o.status = 'completed' "
            "GROUP BY p.category_id, p.product_id), "
            "ranked AS (SELECT c.category_name, p.product_name, s.revenue, "
            "ROW_NUMBER() OVER (PARTITION BY s.category_id ORDER BY s.revenue DESC, "
            "s.product_id) AS sales_rank FROM sales AS s "
            "JOIN categories AS c ON c.category_id = s.category_id "
            "JOIN products AS p ON p.product_id = s.product_id) "
            "SELECT category_name, product_name, revenue, sales_rank FROM ranked "
            "WHERE sales_rank <= 3",
        ),
        (
            "dense_rank_adds_extra",  # 1, 1, 2, 3 keeps a fourth product
            "WITH sales AS (SELECT p.category_id, p.product_id, "
            f"SUM({_LINE}) AS revenue FROM order_items AS oi "
            "JOIN orders AS o ON o.order_id = oi.order_id "
            "JOIN products AS p ON p.product_id = oi.product_id WHERE o.status = 'completed' "
            "GROUP BY p.category_id, p.product_id), "
            "ranked AS (SELECT c.category_name, p.product_name, s.revenue, "
            "DENSE_RANK() OVER (PARTITION BY s.category_id ORDER BY s.revenue DESC) "
            "AS sales_rank FROM sales AS s "
            "JOIN categories AS c ON c.category_id = s.category_id "
            "JOIN products AS p ON p.product_id = s.product_id) "
            "SELECT category_name, product_name, revenue, sales_rank FROM ranked "
            "WHERE sales_rank <= 3",
        ),
        (
            "third_place_threshold",  # categories with fewer than three products vanish
            "WITH sales AS (SELECT p.category_id, p.product_id, "
            f"SUM({_LINE}) AS revenue FROM order_items AS oi "
            "JOIN orders AS o ON o.order_id = oi.order_id "
            "JOIN products AS p ON p.product_id = oi.product_id WHERE o.status = 'completed' "
            "GROUP BY p.category_id, p.product_id) "
            "SELECT c.category_name, p.product_name, s.revenue, "
            "(SELECT COUNT(*) FROM sales AS h WHERE h.category_id = s.category_id "
            "AND h.revenue > s.revenue) + 1 AS sales_rank "
            "FROM sales AS s JOIN categories AS c ON c.category_id = s.category_id "
            "JOIN products AS p ON p.product_id = s.product_id "
            "WHERE s.revenue >= (SELECT t.revenue FROM sales AS t "
            "WHERE t.category_id = s.category_id ORDER BY t.revenue DESC LIMIT 1 OFFSET 2)",
        ),
        (
            "all_statuses",
            "WITH sales AS (SELECT p.category_id, p.product_id, "
            f"SUM({_LINE}) AS revenue FROM order_items AS oi "
            "JOIN products AS p ON p.product_id = oi.product_id "
            "GROUP BY p.category_id, p.product_id), "
            "ranked AS (SELECT c.category_name, p.product_name, s.revenue, "
            "RANK() OVER (PARTITION BY s.category_id ORDER BY s.revenue DESC) AS sales_rank "
            "FROM sales AS s JOIN categories AS c ON c.category_id = s.category_id "
            "JOIN products AS p ON p.product_id = s.product_id) "
            "SELECT category_name, product_name, revenue, sales_rank FROM ranked "
            "WHERE sales_rank <= 3",
        ),
    ],
    "time-03": [
        (
            "spend_from_line_items",  # the v4 rule says order headers, shipping included
            "WITH spend AS (SELECT o.order_id, o.customer_id, o.order_ts, o.total_amount, "
            f"COALESCE(SUM({_LINE}), 0) AS items_amount FROM orders AS o "
            "LEFT JOIN order_items AS oi ON oi.order_id = o.order_id "
            "WHERE o.status = 'completed' "
            "GROUP BY o.order_id, o.customer_id, o.order_ts, o.total_amount) "
            "SELECT c.customer_id, c.customer_name, s.order_id, s.order_ts, s.total_amount, "
            "SUM(s.items_amount) OVER (PARTITION BY c.customer_id ORDER BY s.order_ts, "
            "s.order_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cumulative_spend "
            "FROM spend AS s JOIN customers AS c ON c.customer_id = s.customer_id "
            "WHERE c.city = '上海' ORDER BY c.customer_id, s.order_ts, s.order_id",
        ),
        (
            "restarts_each_year",  # cumulative spend does not reset on 1 January
            "SELECT c.customer_id, c.customer_name, o.order_id, o.order_ts, o.total_amount, "
            "SUM(o.total_amount) OVER (PARTITION BY c.customer_id, year(o.order_ts) "
            "ORDER BY o.order_ts, o.order_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
            "AS cumulative_spend FROM orders AS o "
            "JOIN customers AS c ON c.customer_id = o.customer_id "
            "WHERE c.city = '上海' AND o.status = 'completed' "
            "ORDER BY c.customer_id, o.order_ts, o.order_id",
        ),
        (
            "all_statuses",
            "SELECT c.customer_id, c.customer_name, o.order_id, o.order_ts, o.total_amount, "
            "SUM(o.total_amount) OVER (PARTITION BY c.customer_id ORDER BY o.order_ts, "
            "o.order_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cumulative_spend "
            "FROM orders AS o JOIN customers AS c ON c.customer_id = o.customer_id "
            "WHERE c.city = '上海' ORDER BY c.customer_id, o.order_ts, o.order_id",
        ),
    ],
    "complex-01": [
        (
            "global_average",  # not correlated with the store
            "SELECT o.order_id, s.store_name, o.total_amount FROM orders AS o "
            "JOIN stores AS s ON s.store_id = o.store_id WHERE o.status = 'completed' "
            "AND o.total_amount > (SELECT AVG(total_amount) FROM orders "
            "WHERE status = 'completed')",
        ),
        (
            "average_includes_unfinished_orders",
            "SELECT o.order_id, s.store_name, o.total_amount FROM orders AS o "
            "JOIN stores AS s ON s.store_id = o.store_id WHERE o.status = 'completed' "
            "AND o.total_amount > (SELECT AVG(o2.total_amount) FROM orders AS o2 "
            "WHERE o2.store_id = o.store_id)",
        ),
    ],
    "complex-02": [
        (
            "not_in_meets_null",  # an uncategorised product was sold: NOT IN sees a NULL
            "SELECT c.category_id, c.category_name FROM categories AS c "
            "WHERE c.category_id NOT IN (SELECT p.category_id FROM products AS p "
            "JOIN order_items AS oi ON oi.product_id = p.product_id "
            "JOIN orders AS o ON o.order_id = oi.order_id WHERE o.status = 'completed')",
        ),
        (
            "ignores_order_status",  # a cancelled sale is not a sale
            "SELECT c.category_id, c.category_name FROM categories AS c WHERE NOT EXISTS "
            "(SELECT 1 FROM products AS p JOIN order_items AS oi ON oi.product_id = p.product_id "
            "WHERE p.category_id = c.category_id)",
        ),
    ],
    "complex-03": [
        (
            "missing_month_as_zero",  # customers with only one of the two months come in
            f"WITH m12 AS (SELECT customer_id, SUM(total_amount) AS amount FROM orders "
            f"WHERE status = 'completed' AND {_DEC} GROUP BY customer_id), "
            f"m01 AS (SELECT customer_id, SUM(total_amount) AS amount FROM orders "
            f"WHERE status = 'completed' AND {_JAN} GROUP BY customer_id) "
            "SELECT c.customer_id, c.customer_name, COALESCE(m12.amount, 0) AS dec_amount, "
            "COALESCE(m01.amount, 0) AS jan_amount, "
            "COALESCE(m01.amount, 0) - COALESCE(m12.amount, 0) AS increase "
            "FROM m12 FULL JOIN m01 ON m01.customer_id = m12.customer_id "
            "JOIN customers AS c ON c.customer_id = COALESCE(m12.customer_id, m01.customer_id) "
            "WHERE COALESCE(m01.amount, 0) > COALESCE(m12.amount, 0)",
        ),
        (
            "december_cut_at_new_years_eve",  # < '2025-12-31' loses the late 31 Dec order
            "WITH m12 AS (SELECT customer_id, SUM(total_amount) AS amount FROM orders "
            "WHERE status = 'completed' AND order_ts >= TIMESTAMP '2025-12-01' "
            "AND order_ts < TIMESTAMP '2025-12-31' GROUP BY customer_id), "
            f"m01 AS (SELECT customer_id, SUM(total_amount) AS amount FROM orders "
            f"WHERE status = 'completed' AND {_JAN} GROUP BY customer_id) "
            "SELECT c.customer_id, c.customer_name, m12.amount AS dec_amount, "
            "m01.amount AS jan_amount, m01.amount - m12.amount AS increase "
            "FROM m12 JOIN m01 ON m01.customer_id = m12.customer_id "
            "JOIN customers AS c ON c.customer_id = m12.customer_id "
            "WHERE m01.amount > m12.amount",
        ),
    ],
    "data-01": [
        (
            "fan_out_join",  # split payments repeat the order amount
            "SELECT s.store_name, SUM(o.total_amount) AS order_amount, "
            "COALESCE(SUM(p.amount), 0) AS paid_amount, "
            "SUM(o.total_amount) - COALESCE(SUM(p.amount), 0) AS unpaid_amount "
            "FROM orders AS o JOIN stores AS s ON s.store_id = o.store_id "
            "LEFT JOIN payments AS p ON p.order_id = o.order_id "
            f"WHERE o.status = 'completed' AND o.{_JAN} GROUP BY s.store_id, s.store_name",
        ),
        (
            "payments_of_unfinished_orders",  # receipts of cancelled / pending orders counted
            f"WITH ord AS (SELECT store_id, SUM(total_amount) AS order_amount FROM orders "
            f"WHERE status = 'completed' AND {_JAN} GROUP BY store_id), "
            "paid AS (SELECT o.store_id, SUM(p.amount) AS paid_amount FROM payments AS p "
            f"JOIN orders AS o ON o.order_id = p.order_id WHERE o.{_JAN} GROUP BY o.store_id) "
            "SELECT s.store_name, ord.order_amount, COALESCE(paid.paid_amount, 0) AS paid_amount, "
            "ord.order_amount - COALESCE(paid.paid_amount, 0) AS unpaid_amount "
            "FROM ord JOIN stores AS s ON s.store_id = ord.store_id "
            "LEFT JOIN paid ON paid.store_id = ord.store_id",
        ),
        (
            "inner_join_drops_unpaid_order",
            f"WITH jan AS (SELECT order_id, store_id, total_amount FROM orders "
            f"WHERE status = 'completed' AND {_JAN}), "
            "paid AS (SELECT order_id, SUM(amount) AS paid FROM payments GROUP BY order_id) "
            "SELECT s.store_name, SUM(j.total_amount) AS order_amount, "
            "SUM(p.paid) AS paid_amount, SUM(j.total_amount) - SUM(p.paid) AS unpaid_amount "
            "FROM jan AS j JOIN stores AS s ON s.store_id = j.store_id "
            "JOIN paid AS p ON p.order_id = j.order_id GROUP BY s.store_id, s.store_name",
        ),
    ],
    "data-02": [
        (
            "inner_join_hides_order_without_lines",
            "WITH items AS (SELECT order_id, SUM(quantity * unit_price - discount) "
            "AS items_amount FROM order_items GROUP BY order_id) "
            "SELECT o.order_id, o.total_amount - o.shipping_fee AS header_goods_amount, "
            "i.items_amount, o.total_amount - o.shipping_fee - i.items_amount AS difference "
            "FROM orders AS o JOIN items AS i ON i.order_id = o.order_id "
            "WHERE o.status = 'completed' AND o.total_amount - o.shipping_fee <> i.items_amount",
        ),
        (
            "header_total_with_shipping",  # every delivered order looks mismatched
            "WITH items AS (SELECT order_id, SUM(quantity * unit_price - discount) "
            "AS items_amount FROM order_items GROUP BY order_id) "
            "SELECT o.order_id, o.total_amount AS header_goods_amount, "
            "COALESCE(i.items_amount, 0) AS items_amount, "
            "o.total_amount - COALESCE(i.items_amount, 0) AS difference "
            "FROM orders AS o LEFT JOIN items AS i ON i.order_id = o.order_id "
            "WHERE o.status = 'completed' AND o.total_amount <> COALESCE(i.items_amount, 0)",
        ),
        (
            "all_statuses",  # a pending order without lines is not in scope
            "WITH items AS (SELECT order_id, SUM(quantity * unit_price - discount) "
            "AS items_amount FROM order_items GROUP BY order_id) "
            "SELECT o.order_id, o.total_amount - o.shipping_fee AS header_goods_amount, "
            "COALESCE(i.items_amount, 0) AS items_amount, "
            "o.total_amount - o.shipping_fee - COALESCE(i.items_amount, 0) AS difference "
            "FROM orders AS o LEFT JOIN items AS i ON i.order_id = o.order_id "
            "WHERE o.total_amount - o.shipping_fee <> COALESCE(i.items_amount, 0)",
        ),
    ],
    "data-03": [
        (
            "inner_join_cannot_see_orphans",
            "SELECT oi.order_id, oi.line_no, oi.product_id FROM order_items AS oi "
            "JOIN products AS p ON p.product_id = oi.product_id WHERE p.product_id IS NULL",
        ),
        (
            "completed_orders_only",  # the question covers every status
            "SELECT oi.order_id, oi.line_no, oi.product_id FROM order_items AS oi "
            "JOIN orders AS o ON o.order_id = oi.order_id WHERE o.status = 'completed' "
            "AND NOT EXISTS (SELECT 1 FROM products AS p WHERE p.product_id = oi.product_id)",
        ),
    ],
}

BANK_TRAPS: dict[str, dict[str, list[tuple[str, str]]]] = {
    "sales-fixture": TRAPS,
    "retail": RETAIL_TRAPS,
}
