#!/usr/bin/env bash
# OLTP plans unchanged: every statement pgbench's TPC-B runs and every statement go-tpc's TPC-C
# runs (its SQL, from go-tpc v1.0.9's tpcc/*.go) gets the same plan on scoot tables as on heap
# tables holding the same rows, with literal parameters (custom plans) and as prepared statements
# on a generic plan. The custom scan, its costing (scoot.index_fetch_cost on parameterized index
# paths, the ScootScan's costs) and scoot's size estimates must leave point lookups, short range
# scans and the stock-level nested loop exactly as PostgreSQL plans them on heap.
#
# Plans are compared node by node: node types, relations, indexes and index conditions; a
# ScootScan counts as the Seq Scan it replaces and its Scoot* lines and filter lines (a ScootScan
# shows pushed filters as block filters) are left out.
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

# ---- TPC-C, one warehouse (go-tpc's PostgreSQL DDL and its table sizes), then pgbench scale 1
q <<'SQL' || fail "setup"
CREATE SCHEMA h; CREATE SCHEMA s;
SET search_path = h;
CREATE TABLE warehouse (w_id INT NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20),
  w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax DECIMAL(4, 4), w_ytd DECIMAL(12, 2), PRIMARY KEY (w_id));
CREATE TABLE district (d_id INT NOT NULL, d_w_id INT NOT NULL, d_name VARCHAR(10), d_street_1 VARCHAR(20),
  d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax DECIMAL(4, 4),
  d_ytd DECIMAL(12, 2), d_next_o_id INT, PRIMARY KEY (d_w_id, d_id));
CREATE TABLE customer (c_id INT NOT NULL, c_d_id INT NOT NULL, c_w_id INT NOT NULL, c_first VARCHAR(16),
  c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), c_city VARCHAR(20),
  c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16), c_since TIMESTAMP, c_credit CHAR(2),
  c_credit_lim DECIMAL(12, 2), c_discount DECIMAL(4,4), c_balance DECIMAL(12,2), c_ytd_payment DECIMAL(12,2),
  c_payment_cnt INT, c_delivery_cnt INT, c_data VARCHAR(500), PRIMARY KEY(c_w_id, c_d_id, c_id));
CREATE INDEX idx_customer ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE TABLE history (h_c_id INT NOT NULL, h_c_d_id INT NOT NULL, h_c_w_id INT NOT NULL, h_d_id INT NOT NULL,
  h_w_id INT NOT NULL, h_date TIMESTAMP, h_amount DECIMAL(6, 2), h_data VARCHAR(24));
CREATE TABLE new_order (no_o_id INT NOT NULL, no_d_id INT NOT NULL, no_w_id INT NOT NULL,
  PRIMARY KEY(no_w_id, no_d_id, no_o_id));
CREATE TABLE orders (o_id INT NOT NULL, o_d_id INT NOT NULL, o_w_id INT NOT NULL, o_c_id INT, o_entry_d TIMESTAMP,
  o_carrier_id INT, o_ol_cnt INT, o_all_local INT, PRIMARY KEY(o_w_id, o_d_id, o_id));
CREATE INDEX idx_order ON orders (o_w_id, o_d_id, o_c_id, o_id);
CREATE TABLE order_line (ol_o_id INT NOT NULL, ol_d_id INT NOT NULL, ol_w_id INT NOT NULL, ol_number INT NOT NULL,
  ol_i_id INT NOT NULL, ol_supply_w_id INT, ol_delivery_d TIMESTAMP, ol_quantity INT, ol_amount DECIMAL(6, 2),
  ol_dist_info CHAR(24), PRIMARY KEY(ol_w_id, ol_d_id, ol_o_id, ol_number));
CREATE TABLE stock (s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity INT, s_dist_01 CHAR(24),
  s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24), s_dist_06 CHAR(24),
  s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd INT, s_order_cnt INT,
  s_remote_cnt INT, s_data VARCHAR(50), PRIMARY KEY(s_w_id, s_i_id));
CREATE TABLE item (i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5, 2), i_data VARCHAR(50),
  PRIMARY KEY(i_id));

INSERT INTO warehouse VALUES (1, 'w1', 'street1', 'street2', 'city', 'ST', '123456789', 0.0712, 300000);
INSERT INTO district SELECT d, 1, 'd' || d, 'street1', 'street2', 'city', 'ST', '123456789', 0.0512, 30000, 3001
FROM generate_series(1, 10) d;
INSERT INTO customer SELECT c, d, 1, 'first' || c, 'OE', 'LAST' || (c * 7 % 1000), 'street1', 'street2', 'city',
  'ST', '123456789', '1234567890123456', timestamp '2026-01-01', CASE WHEN c % 10 = 0 THEN 'BC' ELSE 'GC' END,
  50000, (c % 5000) / 10000.0, -10, 10, 1, 0, repeat('x', 300 + c % 200)
FROM generate_series(1, 10) d, generate_series(1, 3000) c;
INSERT INTO history SELECT c, d, 1, d, 1, timestamp '2026-01-01', 10, 'history data'
FROM generate_series(1, 10) d, generate_series(1, 3000) c;
INSERT INTO orders SELECT o, d, 1, (o * 1237 % 3000) + 1, timestamp '2026-01-01' + o * interval '1 second',
  CASE WHEN o < 2101 THEN 1 + o % 10 END, 5 + (o * 31 + d) % 11, 1
FROM generate_series(1, 10) d, generate_series(1, 3000) o;
INSERT INTO new_order SELECT o, d, 1 FROM generate_series(1, 10) d, generate_series(2101, 3000) o;
INSERT INTO order_line SELECT o_id, o_d_id, 1, n, (o_id * 97 + n * 7919 + o_d_id) % 100000 + 1, 1,
  CASE WHEN o_id < 2101 THEN o_entry_d END, 5, CASE WHEN o_id < 2101 THEN 0 ELSE ((o_id * n) % 999999) / 100.0 END,
  'dist info 24 characters.'
FROM orders, generate_series(1, 15) n WHERE n <= o_ol_cnt;
INSERT INTO item SELECT i, i % 10000 + 1, 'item ' || i, 1 + (i % 9900) / 100.0,
  CASE WHEN i % 10 = 0 THEN 'ORIGINAL ' ELSE '' END || repeat('d', 26 + i % 15) FROM generate_series(1, 100000) i;
INSERT INTO stock SELECT i, 1, 10 + i % 91, 'dist01 24 characters....', 'dist02 24 characters....',
  'dist03 24 characters....', 'dist04 24 characters....', 'dist05 24 characters....', 'dist06 24 characters....',
  'dist07 24 characters....', 'dist08 24 characters....', 'dist09 24 characters....', 'dist10 24 characters....',
  0, 0, 0, repeat('s', 26 + i % 24) FROM generate_series(1, 100000) i;
SQL
# the same rows in scoot tables, then the same primary keys and indexes under the same names
tables="warehouse district customer history new_order orders order_line stock item"
{
  echo "SET default_table_access_method = scoot;"
  for t in $tables; do
    echo "CREATE TABLE s.$t (LIKE h.$t);"
    echo "INSERT INTO s.$t SELECT * FROM h.$t;"
  done
  cat <<'SQL'
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.conname, t.relname, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
           JOIN pg_class t ON t.oid = c.conrelid WHERE c.contype = 'p' AND t.relnamespace = 'h'::regnamespace LOOP
    EXECUTE format('ALTER TABLE s.%I ADD CONSTRAINT %I %s', r.relname, r.conname, r.def);
  END LOOP;
  FOR r IN SELECT indexdef FROM pg_indexes WHERE schemaname = 'h'
           AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE connamespace = 'h'::regnamespace) LOOP
    EXECUTE replace(r.indexdef, ' ON h.', ' ON s.');
  END LOOP;
END $$;
SQL
  echo "VACUUM ANALYZE;"
} | q || fail "scoot copy"
for sch in h s; do
  am=heap; [ $sch = s ] && am=scoot
  PGOPTIONS="-c search_path=$sch -c default_table_access_method=$am" pgbench -i -s 1 -q >/dev/null 2>&1 ||
    fail "pgbench -i ($am)"
done
q -Atc "SELECT string_agg(DISTINCT a.amname, ',') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_am a ON a.oid = c.relam WHERE n.nspname = 's' AND c.relkind = 'r'" | grep -qx scoot ||
  fail "schema s is not all scoot"
q -c "ANALYZE"

# ---- the statements: go-tpc's SQL as it sends it (? placeholders) and pgbench's TPC-B script, each
# with one set of arguments; compared as prepared statements on a custom and on a generic plan
python3 - <<'PY' || fail "plan comparison"
import re, sys
import psycopg

IN10 = "(" + ",".join(["(?,?,?)"] * 10) + ")"
D10 = sum([[1, d, 2101] for d in range(1, 11)], [])
STMTS = [
    ("SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse WHERE w_id = ? AND c_w_id = w_id AND c_d_id = ? AND c_id = ?", [1, 3, 1234]),
    ("SELECT d_next_o_id, d_tax FROM district WHERE d_id = ? AND d_w_id = ? FOR UPDATE", [3, 1]),
    ("UPDATE district SET d_next_o_id = ? + 1 WHERE d_id = ? AND d_w_id = ?", [3001, 3, 1]),
    ("SELECT i_price, i_name, i_data, i_id FROM item WHERE i_id IN (" + ",".join(["?"] * 10) + ")",
     [11, 2222, 33333, 44, 5555, 66666, 7, 888, 9999, 10000]),
    ("SELECT s_i_id, s_quantity, s_data, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10 FROM stock WHERE (s_w_id, s_i_id) IN (" + ",".join(["(?,?)"] * 10) + ") FOR UPDATE",
     sum([[1, i] for i in (11, 2222, 33333, 44, 5555, 66666, 7, 888, 9999, 10000)], [])),
    ("INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_ol_cnt, o_all_local) VALUES (?, ?, ?, ?, ?, ?, ?)", [3001, 3, 1, 1234, "2026-01-02", 10, 1]),
    ("INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (?, ?, ?)", [3001, 3, 1]),
    ("UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ? WHERE s_i_id = ? AND s_w_id = ?", [50, 5, 0, 2222, 1]),
    ("UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?", [10, 1]),
    ("SELECT w_street_1, w_street_2, w_city, w_state, w_zip, w_name FROM warehouse WHERE w_id = ?", [1]),
    ("UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?", [10, 1, 3]),
    ("SELECT d_street_1, d_street_2, d_city, d_state, d_zip, d_name FROM district WHERE d_w_id = ? AND d_id = ?", [1, 3]),
    ("SELECT count(c_id) namecnt FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ?", [1, 3, "LAST42"]),
    ("SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first", [1, 3, "LAST42"]),
    ("SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_credit, c_credit_lim, c_discount, c_balance, c_since FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ? FOR UPDATE", [1, 3, 1234]),
    ("SELECT c_data FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?", [1, 3, 1234]),
    ("UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, c_payment_cnt = c_payment_cnt + 1, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?", [10, 10, "new data", 1, 3, 1234]),
    ("INSERT INTO history (h_c_d_id, h_c_w_id, h_c_id, h_d_id, h_w_id, h_date, h_amount, h_data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [3, 1, 1234, 3, 1, "2026-01-02", 10, "data"]),
    ("SELECT c_balance, c_first, c_middle, c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first", [1, 3, "LAST42"]),
    ("SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?", [1, 3, 1234]),
    ("SELECT o_id, o_carrier_id, o_entry_d FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? ORDER BY o_id DESC LIMIT 1", [1, 3, 1234]),
    ("SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?", [1, 3, 2500]),
    ("SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ? ORDER BY no_o_id ASC LIMIT 1 FOR UPDATE", [1, 3]),
    ("DELETE FROM new_order WHERE (no_w_id, no_d_id, no_o_id) IN " + IN10, D10),
    ("UPDATE orders SET o_carrier_id = ? WHERE (o_w_id, o_d_id, o_id) IN " + IN10, [5] + D10),
    ("SELECT o_d_id, o_c_id FROM orders WHERE (o_w_id, o_d_id, o_id) IN " + IN10, D10),
    ("UPDATE order_line SET ol_delivery_d = ? WHERE (ol_w_id, ol_d_id, ol_o_id) IN " + IN10, ["2026-01-03"] + D10),
    ("SELECT ol_d_id, SUM(ol_amount) FROM order_line WHERE (ol_w_id, ol_d_id, ol_o_id) IN " + IN10 + " GROUP BY ol_d_id", D10),
    ("UPDATE customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?", [100, 1, 3, 1234]),
    ("SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?", [1, 3]),
    ("SELECT COUNT(DISTINCT (s_i_id)) stock_count FROM order_line, stock WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id < ? AND ol_o_id >= ? - 20 AND s_w_id = ? AND s_i_id = ol_i_id AND s_quantity < ?", [1, 3, 3001, 3001, 1, 15]),
    ("UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?", [100, 4242]),
    ("SELECT abalance FROM pgbench_accounts WHERE aid = ?", [4242]),
    ("UPDATE pgbench_tellers SET tbalance = tbalance + ? WHERE tid = ?", [100, 7]),
    ("UPDATE pgbench_branches SET bbalance = bbalance + ? WHERE bid = ?", [100, 1]),
    ("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP)", [7, 1, 4242, 100]),
]


def numbered(sql):
    n = iter(range(1, 1000))
    return re.sub(r"\?", lambda m: f"${next(n)}", sql)


def lit(v):
    return str(v) if isinstance(v, int) else "'" + v + "'"


def normalize(lines):
    out = []
    for line in lines:
        line = line.replace("Custom Scan (ScootScan) on", "Seq Scan on")
        if re.match(r"\s*(Scoot |Filter:|Rows Removed|Recheck Cond:|Heap Fetches)", line):
            continue
        out.append(re.sub(r" +", " ", re.sub(r" *->  *", "-> ", line)).rstrip())
    return out


def plan(conn, schema, sql, args, mode):
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(f"SET LOCAL search_path = {schema}")
        cur.execute(f"SET LOCAL plan_cache_mode = force_{mode}_plan")
        cur.execute(f"PREPARE p AS {numbered(sql)}")
        cur.execute(f"EXPLAIN (COSTS OFF) EXECUTE p({', '.join(map(lit, args))})")
        rows = [r[0] for r in cur.fetchall()]
        cur.execute("ROLLBACK")
        cur.execute("DEALLOCATE p")
    return normalize(rows)


conn = psycopg.connect("", autocommit=True, prepare_threshold=None)
n = bad = 0
scans = 0
for sql, args in STMTS:
    assert sql.count("?") == len(args), sql
    for mode in ("custom", "generic"):
        ph = plan(conn, "h", sql, args, mode)
        ps = plan(conn, "s", sql, args, mode)
        n += 1
        scans += sum("Index" in l for l in ph)
        if ph != ps:
            bad += 1
            print(f"PLAN DIFFERS ({mode}): {sql}")
            print("  heap:  " + "\n         ".join(ph))
            print("  scoot: " + "\n         ".join(ps))
if n < 70 or scans < 40:
    sys.exit(f"FAIL: only {n} plans compared ({scans} index nodes)")
if bad:
    sys.exit(f"FAIL: {bad} of {n} OLTP plans differ between heap and scoot")
print(f"ok: {n} OLTP plans (TPC-C as go-tpc runs it, pgbench TPC-B; custom and generic; {scans} index nodes) are heap's on scoot")
PY
