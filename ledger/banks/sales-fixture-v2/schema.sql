-- sales-fixture v2: the acceptance fixture of v1 plus monthly store traffic (issue 19).
-- Instants are TIMESTAMPTZ; the database session runs in UTC while the business day is
-- Asia/Shanghai. Amounts are whole yuan in DECIMAL.

-- Store master data. store_id is the key; store_name is not unique across regions.
CREATE TABLE stores (
    store_id   INTEGER PRIMARY KEY,
    store_name VARCHAR NOT NULL,
    region     VARCHAR NOT NULL,
    status     VARCHAR NOT NULL       -- 'open' | 'closed'
);

-- One row per sale (order).
CREATE TABLE sales (
    sale_id     VARCHAR PRIMARY KEY,
    region      VARCHAR NOT NULL,     -- sales region recorded on the sale
    store_id    INTEGER NOT NULL,
    store_name  VARCHAR NOT NULL,     -- store name as recorded on the sale
    salesperson VARCHAR NOT NULL,
    deal_time   TIMESTAMPTZ NOT NULL, -- when the deal was closed (business time of the sale)
    created_at  TIMESTAMPTZ NOT NULL, -- when the record was entered
    amount      DECIMAL(12, 2) NOT NULL,
    valid       VARCHAR NOT NULL      -- 'Y' valid, 'N' invalid
);

-- Tags of a sale: a sale may carry several tags, or none.
CREATE TABLE sale_tags (
    sale_id VARCHAR NOT NULL,
    tag     VARCHAR NOT NULL,
    PRIMARY KEY (sale_id, tag)
);

-- Store traffic per calendar month (Asia/Shanghai): visitors and the visitors who bought.
-- The conversion rate of a store in a month is buyers / visitors.
CREATE TABLE store_traffic (
    store_id INTEGER NOT NULL,
    month    DATE NOT NULL,           -- first day of the month
    visitors INTEGER NOT NULL,
    buyers   INTEGER NOT NULL,
    PRIMARY KEY (store_id, month)
);
