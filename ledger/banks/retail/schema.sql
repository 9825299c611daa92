-- retail v4: a small retail warehouse. All timestamps are business local time (Asia/Shanghai),
-- stored without a time zone. Money is DECIMAL in yuan. No foreign keys are declared: the data
-- deliberately contains orphan references (see the semantic layer).

CREATE TABLE customers (
    customer_id   INTEGER PRIMARY KEY,
    customer_name VARCHAR NOT NULL,
    city          VARCHAR NOT NULL,
    phone         VARCHAR,            -- NULL or '' both mean "no phone number left"
    is_member     BOOLEAN,            -- NULL = unknown
    signup_date   DATE NOT NULL
);

CREATE TABLE stores (
    store_id   INTEGER PRIMARY KEY,
    store_name VARCHAR NOT NULL,
    city       VARCHAR NOT NULL,
    opened_on  DATE NOT NULL
);

CREATE TABLE categories (
    category_id   INTEGER PRIMARY KEY,
    category_name VARCHAR NOT NULL
);

CREATE TABLE products (
    product_id   INTEGER PRIMARY KEY,
    product_name VARCHAR NOT NULL,
    category_id  INTEGER,             -- NULL = uncategorised product
    list_price   DECIMAL(10, 2) NOT NULL,
    is_active    BOOLEAN              -- on sale; NULL = unknown
);

-- Order header: one row per order.
CREATE TABLE orders (
    order_id     INTEGER PRIMARY KEY,
    customer_id  INTEGER NOT NULL,
    store_id     INTEGER NOT NULL,
    order_ts     TIMESTAMP NOT NULL,  -- business local time
    status       VARCHAR NOT NULL,    -- 'completed' | 'cancelled' | 'pending'
    shipping_fee DECIMAL(10, 2) NOT NULL,
    total_amount DECIMAL(12, 2) NOT NULL  -- goods amount + shipping_fee, as billed
);

-- Order line items: line amount = quantity * unit_price - discount.
CREATE TABLE order_items (
    order_id   INTEGER NOT NULL,
    line_no    INTEGER NOT NULL,
    product_id INTEGER NOT NULL,
    quantity   INTEGER NOT NULL,
    unit_price DECIMAL(10, 2) NOT NULL,
    discount   DECIMAL(10, 2) NOT NULL,
    PRIMARY KEY (order_id, line_no)
);

-- Payments: an order may be paid in several payments, or not at all.
CREATE TABLE payments (
    payment_id INTEGER PRIMARY KEY,
    order_id   INTEGER NOT NULL,
    paid_ts    TIMESTAMP NOT NULL,
    method     VARCHAR NOT NULL,
    amount     DECIMAL(12, 2) NOT NULL
);

-- Returns: return_no identifies a return; a re-sent record repeats it under a new return_id.
CREATE TABLE returns (
    return_id     INTEGER PRIMARY KEY,
    return_no     VARCHAR NOT NULL,
    order_id      INTEGER NOT NULL,
    product_id    INTEGER NOT NULL,
    quantity      INTEGER NOT NULL,
    refund_amount DECIMAL(12, 2) NOT NULL,
    returned_on   DATE NOT NULL
);
