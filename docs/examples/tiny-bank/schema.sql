-- A tiny shop: customers and their orders. Amounts are in yuan.
CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY,
    name        VARCHAR NOT NULL,
    city        VARCHAR            -- NULL when unknown
);

CREATE TABLE orders (
    order_id    INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (customer_id),
    ordered_at  TIMESTAMPTZ NOT NULL,
    status      VARCHAR NOT NULL,   -- 'completed' or 'cancelled'
    amount      DECIMAL(12, 2) NOT NULL
);
