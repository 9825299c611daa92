-- sales-fixture v2 seed: the rows of v1 (S01..S06 as in the acceptance method; times are
-- written with their Asia/Shanghai offset, +08:00), then monthly store traffic.

INSERT INTO stores VALUES
    (1, '门店A', '区域甲', 'open'),
    (2, '门店B', '区域甲', 'open'),
    (3, '门店C', '区域甲', 'closed'),
    (4, '门店C', '区域乙', 'open');

INSERT INTO sales VALUES
    ('S01', '区域甲', 1, '门店A', '人员甲',
     TIMESTAMPTZ '2026-09-01 00:00:00+08:00', TIMESTAMPTZ '2026-09-01 00:02:00+08:00',  100.00, 'Y'),
    ('S02', '区域甲', 1, '门店A', '人员乙',
     TIMESTAMPTZ '2026-09-30 23:59:59+08:00', TIMESTAMPTZ '2026-10-01 00:05:00+08:00',  200.00, 'Y'),
    ('S03', '区域甲', 2, '门店B', '人员丙',
     TIMESTAMPTZ '2026-09-15 12:00:00+08:00', TIMESTAMPTZ '2026-09-15 12:03:00+08:00',  300.00, 'Y'),
    ('S04', '区域乙', 4, '门店C', '人员丁',
     TIMESTAMPTZ '2026-09-15 12:00:00+08:00', TIMESTAMPTZ '2026-09-15 12:04:00+08:00', 9000.00, 'Y'),
    ('S05', '区域甲', 1, '门店A', '人员甲',
     TIMESTAMPTZ '2026-10-01 00:00:00+08:00', TIMESTAMPTZ '2026-09-30 23:50:00+08:00',  700.00, 'Y'),
    ('S06', '区域甲', 1, '门店A', '人员甲',
     TIMESTAMPTZ '2026-09-12 12:00:00+08:00', TIMESTAMPTZ '2026-09-12 12:05:00+08:00',  500.00, 'N');

INSERT INTO sale_tags VALUES
    ('S01', '新客'),
    ('S01', '促销'),
    ('S02', '新客'),
    ('S02', '促销'),
    ('S02', '会员'),
    ('S03', '会员');

-- A composition effect (Simpson's paradox): both stores convert better in September
-- (门店A 80/100 -> 9/10, 门店B 10/100 -> 40/200), but the two stores together convert
-- worse (90/200 = 45% -> 49/210 = 23.33%), because September's visitors went mostly to
-- the store that converts less.
INSERT INTO store_traffic VALUES
    (1, DATE '2026-08-01', 100, 80),
    (1, DATE '2026-09-01',  10,  9),
    (2, DATE '2026-08-01', 100, 10),
    (2, DATE '2026-09-01', 200, 40);
