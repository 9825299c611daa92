INSERT INTO customers VALUES
    (1, 'Ann',   'Shanghai'),
    (2, 'Bo',    'Beijing'),
    (3, 'Chen',  NULL),
    (4, 'Dara',  'Shanghai'),
    (5, 'Eve',   'Hangzhou');

-- Times carry their offset, so the Asia/Shanghai month boundary is real.
INSERT INTO orders VALUES
    (101, 1, TIMESTAMPTZ '2026-08-31 23:30:00+08', 'completed', 120.00),
    (102, 1, TIMESTAMPTZ '2026-09-01 00:10:00+08', 'completed',  80.50),
    (103, 2, TIMESTAMPTZ '2026-09-15 12:00:00+08', 'cancelled', 300.00),
    (104, 2, TIMESTAMPTZ '2026-09-20 09:00:00+08', 'completed',  45.00),
    (105, 3, TIMESTAMPTZ '2026-09-30 23:59:59+08', 'completed', 210.00),
    (106, 3, TIMESTAMPTZ '2026-10-01 00:00:00+08', 'completed',  99.00),
    (107, 5, TIMESTAMPTZ '2026-09-05 10:00:00+08', 'cancelled',  60.00);
