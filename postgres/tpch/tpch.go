// Package tpch loads TPC-H-shaped data into Postgres for benchmarks: the eight tables of the TPC-H schema
// (same columns, types, keys and cardinalities: about 8.66 million rows at scale factor 1), generated inside
// the server from hashes of the row numbers, so a scale factor always gives the same rows. The values follow
// TPC-H's ranges but not its exact distributions or text grammar: it is not a conforming dbgen.
package tpch

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
)

// Schema is the Postgres schema the tables are created in.
const Schema = "tpch"

// Tables are the tables Load creates, in load order.
var Tables = []string{"region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"}

// Rows returns each table's row count at scale factor sf (lineitem: the expected count, 1 to 7 lines per
// order, 4 on average).
func Rows(sf float64) map[string]int64 {
	n := func(base float64) int64 { return max(1, int64(math.Round(base*sf))) }
	return map[string]int64{"region": 5, "nation": 25, "supplier": n(10_000), "customer": n(150_000),
		"part": n(200_000), "partsupp": 4 * n(200_000), "orders": n(1_500_000), "lineitem": 4 * n(1_500_000)}
}

const ddl = `DROP SCHEMA IF EXISTS tpch CASCADE;
CREATE SCHEMA tpch;
CREATE TABLE tpch.region (r_regionkey int PRIMARY KEY, r_name char(25) NOT NULL, r_comment varchar(152));
CREATE TABLE tpch.nation (n_nationkey int PRIMARY KEY, n_name char(25) NOT NULL, n_regionkey int NOT NULL,
  n_comment varchar(152));
CREATE TABLE tpch.supplier (s_suppkey int PRIMARY KEY, s_name char(25) NOT NULL, s_address varchar(40) NOT NULL,
  s_nationkey int NOT NULL, s_phone char(15) NOT NULL, s_acctbal numeric(15,2) NOT NULL, s_comment varchar(101) NOT NULL);
CREATE TABLE tpch.customer (c_custkey int PRIMARY KEY, c_name varchar(25) NOT NULL, c_address varchar(40) NOT NULL,
  c_nationkey int NOT NULL, c_phone char(15) NOT NULL, c_acctbal numeric(15,2) NOT NULL, c_mktsegment char(10) NOT NULL,
  c_comment varchar(117) NOT NULL);
CREATE TABLE tpch.part (p_partkey int PRIMARY KEY, p_name varchar(55) NOT NULL, p_mfgr char(25) NOT NULL,
  p_brand char(10) NOT NULL, p_type varchar(25) NOT NULL, p_size int NOT NULL, p_container char(10) NOT NULL,
  p_retailprice numeric(15,2) NOT NULL, p_comment varchar(23) NOT NULL);
CREATE TABLE tpch.partsupp (ps_partkey int NOT NULL, ps_suppkey int NOT NULL, ps_availqty int NOT NULL,
  ps_supplycost numeric(15,2) NOT NULL, ps_comment varchar(199) NOT NULL, PRIMARY KEY (ps_partkey, ps_suppkey));
CREATE TABLE tpch.orders (o_orderkey bigint PRIMARY KEY, o_custkey int NOT NULL, o_orderstatus char(1) NOT NULL,
  o_totalprice numeric(15,2) NOT NULL, o_orderdate date NOT NULL, o_orderpriority char(15) NOT NULL,
  o_clerk char(15) NOT NULL, o_shippriority int NOT NULL, o_comment varchar(79) NOT NULL);
CREATE TABLE tpch.lineitem (l_orderkey bigint NOT NULL, l_partkey int NOT NULL, l_suppkey int NOT NULL,
  l_linenumber int NOT NULL, l_quantity numeric(15,2) NOT NULL, l_extendedprice numeric(15,2) NOT NULL,
  l_discount numeric(15,2) NOT NULL, l_tax numeric(15,2) NOT NULL, l_returnflag char(1) NOT NULL,
  l_linestatus char(1) NOT NULL, l_shipdate date NOT NULL, l_commitdate date NOT NULL, l_receiptdate date NOT NULL,
  l_shipinstruct char(25) NOT NULL, l_shipmode char(10) NOT NULL, l_comment varchar(44) NOT NULL,
  PRIMARY KEY (l_orderkey, l_linenumber));
-- h(i, salt): a stable non-negative hash (hashint8 is part of Postgres' on-disk hash indexes: it never changes).
CREATE FUNCTION tpch.h(i bigint, salt int) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS 'SELECT abs(hashint8(i * 1000003 + salt)::bigint)';
-- txt(i, salt, lo, hi): a comment of lo..hi characters cut from a fixed text.
CREATE FUNCTION tpch.txt(i bigint, salt int, lo int, hi int) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$SELECT substr('furiously regular requests sleep carefully above the quickly ironic deposits. blithely final ' ||
  'packages nag slyly along the express theodolites. pending accounts haggle fluffily against the bold pinto beans. ' ||
  'even foxes wake quietly across the special instructions. silent platelets integrate furiously after the daring ' ||
  'dependencies. unusual courts detect blithely beside the careful asymptotes. final dolphins boost slowly among ' ||
  'the ruthless warhorses. busy ideas cajole evenly despite the enticing excuses. permanent somas use quickly.',
  1 + (tpch.h(i, salt) % 400)::int, lo + (tpch.h(i, salt + 1) % (hi - lo + 1))::int)$$;`

// Load creates the tpch schema on conn (dropping an existing one) and fills it at scale factor sf, then
// vacuums and analyzes it, so that a later read does not pay for hint bits.
func Load(ctx context.Context, conn *pgx.Conn, sf float64) error {
	if sf < 0.01 {
		// TPC-H's partsupp key formula repeats a supplier of a part when there are fewer than 100 suppliers.
		return fmt.Errorf("tpch: scale factor %v: at least 0.01", sf)
	}
	r := Rows(sf)
	S, C, P, O := r["supplier"], r["customer"], r["part"], r["orders"]
	stmts := []string{ddl,
		`INSERT INTO tpch.region VALUES (0, 'AFRICA', 'lar deposits'), (1, 'AMERICA', 'hs use ironic requests'),
		  (2, 'ASIA', 'ges. thinly even pinto beans'), (3, 'EUROPE', 'ly final courts cajole furiously'),
		  (4, 'MIDDLE EAST', 'uickly special accounts cajole')`,
		`INSERT INTO tpch.nation SELECT i - 1, n[i], r[i], tpch.txt(i, 1, 31, 114) FROM
		  (SELECT ARRAY['ALGERIA','ARGENTINA','BRAZIL','CANADA','EGYPT','ETHIOPIA','FRANCE','GERMANY','INDIA',
		   'INDONESIA','IRAN','IRAQ','JAPAN','JORDAN','KENYA','MOROCCO','MOZAMBIQUE','PERU','CHINA','ROMANIA',
		   'SAUDI ARABIA','VIETNAM','RUSSIA','UNITED KINGDOM','UNITED STATES'] n,
		   ARRAY[0,1,1,1,4,0,3,3,2,2,4,4,2,4,0,0,0,1,2,3,4,2,3,3,1] r) a, generate_series(1, 25) i`,
		fmt.Sprintf(`INSERT INTO tpch.supplier SELECT i, 'Supplier#' || lpad(i::text, 9, '0'), tpch.txt(i, 2, 10, 40),
		  tpch.h(i, 3) %% 25, lpad((10 + tpch.h(i, 4) %% 90)::text, 2, '0') || '-' || lpad((tpch.h(i, 5) %% 1000)::text, 3, '0') ||
		  '-' || lpad((tpch.h(i, 6) %% 1000)::text, 3, '0') || '-' || lpad((tpch.h(i, 7) %% 10000)::text, 4, '0'),
		  ((tpch.h(i, 8) %% 1099999) - 99999) / 100.0, tpch.txt(i, 9, 25, 100) FROM generate_series(1, %d) i`, S),
		fmt.Sprintf(`INSERT INTO tpch.customer SELECT i, 'Customer#' || lpad(i::text, 9, '0'), tpch.txt(i, 2, 10, 40),
		  tpch.h(i, 3) %% 25, lpad((10 + tpch.h(i, 4) %% 90)::text, 2, '0') || '-' || lpad((tpch.h(i, 5) %% 1000)::text, 3, '0') ||
		  '-' || lpad((tpch.h(i, 6) %% 1000)::text, 3, '0') || '-' || lpad((tpch.h(i, 7) %% 10000)::text, 4, '0'),
		  ((tpch.h(i, 8) %% 1099999) - 99999) / 100.0,
		  (ARRAY['AUTOMOBILE','BUILDING','FURNITURE','MACHINERY','HOUSEHOLD'])[1 + tpch.h(i, 9) %% 5],
		  tpch.txt(i, 10, 29, 116) FROM generate_series(1, %d) i`, C),
		fmt.Sprintf(`INSERT INTO tpch.part SELECT i, tpch.txt(i, 1, 20, 55), 'Manufacturer#' || (1 + tpch.h(i, 2) %% 5),
		  'Brand#' || (1 + tpch.h(i, 2) %% 5) || (1 + tpch.h(i, 3) %% 5),
		  (ARRAY['STANDARD','SMALL','MEDIUM','LARGE','ECONOMY','PROMO'])[1 + tpch.h(i, 4) %% 6] || ' ' ||
		  (ARRAY['ANODIZED','BURNISHED','PLATED','POLISHED','BRUSHED'])[1 + tpch.h(i, 5) %% 5] || ' ' ||
		  (ARRAY['TIN','NICKEL','BRASS','STEEL','COPPER'])[1 + tpch.h(i, 6) %% 5],
		  1 + tpch.h(i, 7) %% 50,
		  (ARRAY['SM','LG','MED','JUMBO','WRAP'])[1 + tpch.h(i, 8) %% 5] || ' ' ||
		  (ARRAY['CASE','BOX','BAG','JAR','PKG','PACK','CAN','DRUM'])[1 + tpch.h(i, 9) %% 8],
		  (90000 + ((i / 10) %% 20001) + 100 * (i %% 1000)) / 100.0, tpch.txt(i, 10, 5, 22)
		  FROM generate_series(1, %d) i`, P),
		fmt.Sprintf(`INSERT INTO tpch.partsupp SELECT p, 1 + (p + s * (%d / 4 + (p - 1) / %d)) %% %d,
		  1 + tpch.h(p * 4 + s, 1) %% 9999, (100 + tpch.h(p * 4 + s, 2) %% 99901) / 100.0, tpch.txt(p * 4 + s, 3, 49, 198)
		  FROM generate_series(1, %d) p, generate_series(0, 3) s`, S, S, S, P),
		fmt.Sprintf(`INSERT INTO tpch.orders SELECT o, 1 + tpch.h(o, 1) %% %d,
		  (ARRAY['F','O','P'])[1 + tpch.h(o, 2) %% 3], (100000 + tpch.h(o, 3) %% 50000000) / 100.0,
		  date '1992-01-01' + (tpch.h(o, 4) %% 2406)::int,
		  (ARRAY['1-URGENT','2-HIGH','3-MEDIUM','4-NOT SPECIFIED','5-LOW'])[1 + tpch.h(o, 5) %% 5],
		  'Clerk#' || lpad((1 + tpch.h(o, 6) %% 1000)::text, 9, '0'), 0, tpch.txt(o, 7, 19, 78)
		  FROM generate_series(1, %d) o`, C, O),
		fmt.Sprintf(`INSERT INTO tpch.lineitem SELECT o, 1 + tpch.h(k, 1) %% %d, 1 + tpch.h(k, 2) %% %d, l, q,
		  q * (900 + tpch.h(k, 3) %% 1200), (tpch.h(k, 4) %% 11) / 100.0, (tpch.h(k, 5) %% 9) / 100.0,
		  (ARRAY['R','A','N'])[1 + tpch.h(k, 6) %% 3], (ARRAY['O','F'])[1 + tpch.h(k, 7) %% 2],
		  d + 1 + (tpch.h(k, 8) %% 121)::int, d + 30 + (tpch.h(k, 9) %% 61)::int, d + 2 + (tpch.h(k, 10) %% 150)::int,
		  (ARRAY['DELIVER IN PERSON','COLLECT COD','NONE','TAKE BACK RETURN'])[1 + tpch.h(k, 11) %% 4],
		  (ARRAY['REG AIR','AIR','RAIL','SHIP','TRUCK','MAIL','FOB'])[1 + tpch.h(k, 12) %% 7], tpch.txt(k, 13, 10, 43)
		  FROM (SELECT o, l, o * 8 + l AS k, date '1992-01-01' + (tpch.h(o, 4) %% 2406)::int AS d,
		        (1 + tpch.h(o * 8 + l, 14) %% 50)::numeric(15,2) AS q
		        FROM generate_series(1, %d) o, LATERAL generate_series(1, 1 + (tpch.h(o, 15) %% 7)::int) l) x`, P, S, O),
		`VACUUM (ANALYZE) tpch.region, tpch.nation, tpch.supplier, tpch.customer, tpch.part, tpch.partsupp,
		  tpch.orders, tpch.lineitem`,
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("tpch: %.60s...: %w", s, err)
		}
	}
	return nil
}
